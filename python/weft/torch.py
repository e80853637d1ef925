"""The torch.distributed backend "weft".

    import torch.distributed as dist
    import weft.torch  # registers the backend
    dist.init_process_group(backend="weft")  # env://, tcp://, file:// as with any backend

weft's process group rendezvouses through the c10d Store torch passes it (no extra port) and
honours init_process_group's timeout; its timeout errors say "Timed out". CPU tensors of types
bool, int8, uint8, int32, int64, float16, bfloat16, float32 and float64 (bool as NCCL reduces it:
SUM and MAX a logical or, PRODUCT and MIN a logical and); non-contiguous tensors are copied. See
docs/python.md.
"""
import torch.distributed as _dist

from ._weft_torch import ProcessGroupWeft, create_process_group  # noqa: F401

BACKEND = "weft"


def metrics(group=None):
    """The Prometheus text of `group`'s weft communicator (default: the default group).

    The same series every weft process serves at WEFT_METRICS_ADDR; see docs/observability.md.
    """
    if group is None:
        group = _dist.distributed_c10d._get_default_group()
    if not isinstance(group, ProcessGroupWeft):
        raise TypeError(f"weft.torch.metrics: {type(group).__name__} is not a weft process group")
    return group.metrics()


def _create(store, rank, world_size, timeout):
    return create_process_group(store, rank, world_size, timeout)


def _register():
    # register_backend asserts on a second registration; importing twice must be harmless.
    if BACKEND.upper() not in getattr(_dist.Backend, "_plugins", {}):
        _dist.Backend.register_backend(BACKEND, _create)


_register()
