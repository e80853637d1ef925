"""Prints where `cmake --install` puts the Python package `weft` under PREFIX, relative to PREFIX.

    python3 install_dir.py PREFIX

The first directory of this interpreter's own site directories (site.getsitepackages(), then the
user's site directory) that lies under PREFIX/lib, so that `import weft` works after the install
with no PYTHONPATH: with Debian's python3, lib/python3/dist-packages for /usr (where Debian's
packages go), lib/python3.X/dist-packages for /usr/local, lib/python3.X/site-packages for ~/.local.
For any other prefix, the standard lib/python3.X/site-packages, and a note on stderr that
PYTHONPATH must name it.
"""
import os
import site
import sys
import sysconfig


def main():
    prefix = os.path.normpath(os.path.abspath(sys.argv[1]))
    candidates = list(site.getsitepackages())
    if site.ENABLE_USER_SITE is not False:
        candidates.append(site.getusersitepackages())
    for d in candidates:
        rel = os.path.relpath(os.path.normpath(d), prefix)
        if rel.startswith("lib" + os.sep):
            print(rel)
            return
    d = sysconfig.get_path("platlib", "posix_prefix", vars={"base": prefix, "platbase": prefix})
    rel = os.path.relpath(d, prefix)
    print(f"note: {prefix}/{rel} is not on {sys.executable}'s path: set PYTHONPATH to it to "
          "import weft", file=sys.stderr)
    print(rel)


if __name__ == "__main__":
    main()
