#!/usr/bin/python3
"""Draws a benchmark table as a PNG: bus bandwidth (left) and time per call (right) against
message size, log axes, one line per library, and a reference limit (single-thread memcpy, or
one loopback TCP stream) as a dashed line on the bandwidth side.

    bench/plot_bench.py TABLE.tsv OUT.png

TABLE.tsv, as bench/compare.sh and bench/torch_compare.py write it:
    # title: <text>                 (any number of "# key: value" lines; title and limit are used)
    # limit: <label>=<GB/s>
    size  <lib> busbw  <lib> us  ...   (header: tab-separated; "<lib> busbw" and "<lib> us" pairs)
    <bytes>  <GB/s>  <us>  ...         ("-" where a library has no figure)
Needs matplotlib (Debian python3-matplotlib; scripts/setup.sh --bench installs it).
"""
import os
import sys


def read_table(path):
    meta, header, rows = {}, None, []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            if line.startswith("#"):
                key, _, value = line[1:].partition(":")
                meta[key.strip()] = value.strip()
            elif header is None:
                header = line.split("\t")
            else:
                rows.append(line.split("\t"))
    if header is None or header[0] != "size" or not rows:
        raise SystemExit(f"plot_bench.py: {path} holds no table (a 'size' header and rows)")
    return meta, header, rows


def series(header, rows, suffix):
    """{library: ([sizes], [values])} for the columns named '<library> <suffix>'."""
    out = {}
    for i, name in enumerate(header):
        if not name.endswith(" " + suffix):
            continue
        xs, ys = [], []
        for r in rows:
            if i < len(r) and r[i] not in ("", "-"):
                v = float(r[i])
                if v > 0:
                    xs.append(int(r[0]))
                    ys.append(v)
        if xs:
            out[name[: -len(suffix) - 1]] = (xs, ys)
    return out


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    meta, header, rows = read_table(sys.argv[1])
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("plot_bench.py: needs matplotlib (apt install python3-matplotlib, or "
                         "scripts/setup.sh --bench)")
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    bw, us = series(header, rows, "busbw"), series(header, rows, "us")
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    markers = "os^vD<>ph"
    for k, (lib, (xs, ys)) in enumerate(bw.items()):
        left.plot(xs, ys, marker=markers[k % len(markers)], label=lib)
    for k, (lib, (xs, ys)) in enumerate(us.items()):
        right.plot(xs, ys, marker=markers[k % len(markers)], label=lib)
    if "limit" in meta and "=" in meta["limit"]:
        label, _, value = meta["limit"].rpartition("=")
        left.axhline(float(value), linestyle="--", color="gray", label=f"{label} ({float(value):.2f} GB/s)")
    def human(v, _pos):
        for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if v >= scale:
                return f"{v / scale:g} {unit}"
        return f"{v:g} B"

    for ax, ylabel in ((left, "bus bandwidth (GB/s, higher is better)"),
                       (right, "time per call (us, lower is better)")):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=4))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(human))
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(meta.get("title", ""), fontsize="medium")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(sys.argv[2])), exist_ok=True)
    fig.savefig(sys.argv[2], dpi=110)
    print(f"plot_bench.py: wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()
