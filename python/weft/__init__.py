"""weft: collective communication for distributed training.

    import numpy as np, weft
    comm = weft.init()                 # from weft run / torchrun / mpirun / srun
    x = np.ones(1024, dtype=np.float32)
    comm.allreduce(x)                  # in place, every rank
    w = comm.allreduce(x, op="max", async_op=True); w.wait()

Buffers are anything with the buffer protocol (numpy arrays, bytearray, memoryview): no copies.
Errors raise weft.Error (a RuntimeError) or weft.TimeoutError. `import weft.torch` registers the
torch.distributed backend "weft". See docs/python.md.
"""
from ._weft import (  # noqa: F401
    ANY_SOURCE,
    Communicator,
    Error,
    FileStore,
    MemoryStore,
    Store,
    TCPStore,
    TCPStoreServer,
    TimeoutError,
    Work,
    __version__,
    init,
    join,
)

__all__ = [
    "ANY_SOURCE", "Communicator", "Error", "FileStore", "MemoryStore", "Store", "TCPStore", "TCPStoreServer",
    "TimeoutError", "Work", "init", "join", "__version__",
]
