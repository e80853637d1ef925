#!/usr/bin/env python3
"""The build holds the layering (docs/design.md): a source of one layer that includes a header
above it, or a private header of another folder, does not compile, while the headers its layer
may use do. Each probe compiles a one-line file with the exact flags of a real source of the
layer (from compile_commands.json) and checks the outcome both ways, so the test fails if the
views stop hiding what they should or start hiding what they should not.

Usage: layering_test.py BUILD_DIR
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

# (a source of the layer, the header it includes, whether that must compile)
PROBES = [
    ("src/base/log.cc", "core/communicator_impl.h", False),  # upward
    ("src/base/log.cc", "runtime/completion.h", False),  # upward, one layer
    ("src/base/log.cc", "base/fd.h", True),
    ("src/base/log.cc", "security/record.h", False),  # upward
    ("src/security/noise.cc", "base/fd.h", True),
    ("src/security/noise.cc", "runtime/completion.h", False),  # security depends on base only
    ("src/security/noise.cc", "transport/transport.h", False),
    ("src/transport/tcp/mesh.cc", "security/record.h", True),  # tcp runs its links secured
    ("src/transport/shm/segment.cc", "security/record.h", False),  # shm does not depend on it
    ("src/runtime/reactor.cc", "base/log.h", True),
    ("src/collective/ring.cc", "transport/tcp/transport_impl.h", False),  # an implementation
    ("src/collective/ring.cc", "transport/shm/shm_transport.h", False),
    ("src/collective/ring.cc", "reduce/kernels.h", False),  # reduce's private header
    ("src/collective/ring.cc", "reduce/reduce.h", True),
    ("src/collective/ring.cc", "transport/transport.h", True),
    ("src/core/op_queue.cc", "transport/shm/shm_transport.h", False),
    ("src/core/op_queue.cc", "transport/tcp/tcp_transport.h", False),
    ("src/core/op_queue.cc", "transport/factory.h", True),
    ("src/core/op_queue.cc", "rendezvous/tcp_store_table.h", False),
    ("src/transport/tcp/mesh.cc", "transport/shm/segment.h", False),  # a sibling's private header
    ("src/transport/tcp/mesh.cc", "rendezvous/tcp_store_table.h", False),
    ("src/transport/tcp/mesh.cc", "rendezvous/store_common.h", True),
    ("src/transport/tcp/mesh.cc", "collective/context.h", False),  # upward
    ("src/transport/transport.cc", "transport/tcp/frame.h", False),
    ("src/rendezvous/store.cc", "transport/transport.h", False),  # upward
    ("tools/diag_cmd.cc", "core/communicator_impl.h", False),  # tools see exported headers only
    ("tools/diag_cmd.cc", "transport/shm/segment.h", False),
    ("tools/diag_cmd.cc", "core/diag_report.h", True),
    ("src/capi/comm.cc", "core/communicator_impl.h", False),  # the C API: the public API only
    ("src/capi/comm.cc", "rendezvous/bootstrap.h", False),
    ("src/capi/comm.cc", "weft/communicator.h", True),
]

# Probes of parts built only with their dependency (skipped when the source is not built):
# the parameter server (WEFT_BUILD_PS) sees the exported headers of every layer, nothing else.
OPTIONAL_PROBES = [
    ("src/ps/shard.cc", "reduce/reduce.h", True),
    ("src/ps/shard.cc", "rendezvous/bootstrap.h", True),
    ("src/ps/shard.cc", "reduce/kernels.h", False),  # reduce's private header
    ("src/ps/shard.cc", "core/communicator_impl.h", False),
    ("src/ps/shard.cc", "transport/tcp/transport_impl.h", False),
    ("tools/ps_cmd.cc", "ps/server.h", True),  # what weft_ps exports to the tools
    ("tools/ps_cmd.cc", "ps/partition_state.h", False),
]


def command_for(entries, source):
    for e in entries:
        if os.path.normpath(e["file"]).endswith(os.path.normpath(source)):
            args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
            return args, e["directory"]
    raise SystemExit(f"layering_test: {source} is not in compile_commands.json")


def probe_args(args, probe):
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD") or a.endswith((".cc", ".cpp")):
            continue
        out.append(a)
    return out + ["-fsyntax-only", probe]


def main():
    build = sys.argv[1]
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    built = [e["file"] for e in entries]
    probes = PROBES + [p for p in OPTIONAL_PROBES
                       if any(os.path.normpath(f).endswith(os.path.normpath(p[0])) for f in built)]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (source, header, allowed) in enumerate(probes):
            probe = os.path.join(tmp, f"probe{i}.cc")
            with open(probe, "w") as f:
                f.write(f'#include "{header}"\n')
            args, cwd = command_for(entries, source)
            r = subprocess.run(probe_args(args, probe), cwd=cwd, capture_output=True, text=True)
            compiled = r.returncode == 0
            missing = "No such file or directory" in r.stderr or "file not found" in r.stderr
            ok = compiled if allowed else (not compiled and missing)
            verdict = "ok" if ok else "WRONG"
            want = "compiles" if allowed else "is refused"
            print(f"{verdict}: {source} including {header} {want}")
            if not ok:
                failures.append(f"{source} + {header}: exit {r.returncode}\n{r.stderr[-2000:]}")
    for f in failures:
        print(f, file=sys.stderr)
    print(f"{len(probes) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
