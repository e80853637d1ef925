#!/usr/bin/python3
"""The serialization benchmark's results as markdown tables, and optionally a PNG chart.

    bench/serialization/report.py RESULTS.json [--plot OUT.png] [--check]

RESULTS.json: what weft_serialization_bench writes with --benchmark_out_format=json (names are
FORMAT/WORKLOAD/SIZE/DIRECTION). MB/s are 10^6 bytes of the encoded form per second of CPU time.
--check prints nothing but fails (exit 1, naming each) when a round trip fails that must not, or
one passes that cannot (JSON carrying NaN/Inf), or a format is missing: the ctest of the benchmark.
"""
import json
import os
import sys

FORMATS = ["protobuf", "protobuf-repeated-float", "flatbuffers", "avro", "json-nlohmann",
           "json-rapidjson", "json-simdjson", "weft-frame"]
# The seed's figures (records): encode MB/s, decode MB/s, size of its message.
SEED = {"protobuf": (180, 160, "4.2 KB"), "json-nlohmann": (95, 80, "7.8 KB"),
        "avro": (210, 190, "4.0 KB")}


def read(path):
    """{(format, workload, size): {"encode"/"decode": benchmark entry}}, in the file's order."""
    with open(path) as f:
        data = json.load(f)
    rows = {}
    for b in data.get("benchmarks", []):
        parts = b["name"].split("/")
        if len(parts) != 4:
            continue
        fmt, workload, size, direction = parts
        rows.setdefault((fmt, workload, int(size)), {})[direction] = b
    if not rows:
        raise SystemExit(f"report.py: {path} holds no serialization benchmarks")
    return data.get("context", {}), rows


def failure(entries):
    for b in entries.values():
        if b.get("error_occurred"):
            return b.get("error_message", "error")
    return None


def must_fail(fmt, workload):
    return fmt.startswith("json") and workload.endswith("_nonfinite")


def check(rows):
    problems = []
    for (fmt, workload, size), entries in rows.items():
        for direction, b in entries.items():
            name = f"{fmt}/{workload}/{size}/{direction}"
            why = b.get("error_message", "error") if b.get("error_occurred") else None
            if must_fail(fmt, workload):
                if why is None or "fails round trip" not in why:
                    problems.append(f"{name}: carried NaN/Inf through JSON?")
            elif why is not None:
                problems.append(f"{name}: {why}")
    seen = {fmt for fmt, _, _ in rows}
    problems += [f"{fmt}: no results" for fmt in FORMATS if fmt not in seen]
    for p in problems:
        print(f"report.py --check: {p}", file=sys.stderr)
    return not problems


def human(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n:,}"


def rate(entries, direction):
    b = entries.get(direction)
    if b is None or b.get("error_occurred"):
        return "-"
    v = b["bytes_per_second"] / 1e6
    return f"{v:,.0f}" if v >= 10 else f"{v:.1f}"


def wire(entries):
    for b in entries.values():
        if "wire_bytes" in b:
            return int(b["wire_bytes"])
    return None


def table(rows, workload):
    out = ["| format | workload | encode MB/s | decode MB/s | bytes on the wire | round trip |",
           "|---|---|---:|---:|---:|---|"]
    for (fmt, w, size), entries in rows.items():
        if w != workload:
            continue
        why = failure(entries)
        ok = "ok (bit-exact)" if why is None else why.replace("|", "/")
        n = wire(entries)
        if workload == "records" and n is not None:
            label = f"{size:,} records"
            size_text = f"{n:,} ({n * 100 / size:,.0f} per 100 records)"
        else:
            label = f"{human(size)} fp32" + (", 1% non-zero" if w.startswith("sparse") else "")
            size_text = "-" if n is None else f"{n:,}"
        out.append(f"| {fmt} | {label} | {rate(entries, 'encode')} | {rate(entries, 'decode')} "
                   f"| {size_text} | {ok} |")
    return "\n".join(out)


def seed_table(rows):
    out = ["| format | encode MB/s (seed) | decode MB/s (seed) | seed's message | "
           "bytes per 100 records (ours) |", "|---|---:|---:|---:|---:|"]
    for (fmt, w, size), entries in rows.items():
        if w != "records":
            continue
        enc, dec, msg = SEED.get(fmt, ("", "", ""))
        n = wire(entries)
        per100 = "-" if n is None else f"{n * 100 / size:,.0f}"
        out.append(f"| {fmt} | {rate(entries, 'encode')} ({enc or '-'}) | "
                   f"{rate(entries, 'decode')} ({dec or '-'}) | {msg or '-'} | {per100} |")
    return "\n".join(out)


def plot(rows, context, path):
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("report.py: --plot needs matplotlib (apt install python3-matplotlib, or "
                         "scripts/setup.sh)")
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, (bars, dense, sparse) = plt.subplots(1, 3, figsize=(16, 5))
    colors = {fmt: f"C{i}" for i, fmt in enumerate(FORMATS)}
    recs = [(fmt, e) for (fmt, w, _), e in rows.items() if w == "records"]
    for k, direction in enumerate(("encode", "decode")):
        xs = [i + (k - 0.5) * 0.4 for i in range(len(recs))]
        ys = [e[direction]["bytes_per_second"] / 1e6
              if direction in e and not e[direction].get("error_occurred") else 0
              for _, e in recs]
        bars.bar(xs, ys, width=0.4, label=direction, color=["C0", "C1"][k])
    bars.set_xticks(range(len(recs)), [fmt for fmt, _ in recs], rotation=30, ha="right",
                    fontsize="small")
    bars.set_yscale("log")
    bars.set_ylabel("MB/s of encoded bytes (higher is better)")
    bars.set_title("1M user records {name, age}", fontsize="medium")
    bars.legend(fontsize="small")
    bars.grid(True, axis="y", which="both", alpha=0.3)

    def size_label(v, _pos):
        return human(int(v)) if v >= 1 else ""

    for ax, workload, title in ((dense, "tensor", "dense fp32 tensor"),
                                (sparse, "sparse", "sparse fp32 tensor, 1% non-zero")):
        for fmt in FORMATS:
            labelled = False
            for direction, style in (("encode", "-"), ("decode", "--")):
                pts = [(size, e[direction]["bytes_per_second"] / 1e6)
                       for (f, w, size), e in rows.items()
                       if f == fmt and w == workload and direction in e
                       and not e[direction].get("error_occurred")]
                if pts:
                    ax.plot(*zip(*pts), style, marker="o", markersize=3, color=colors[fmt],
                            label=None if labelled else fmt)
                    labelled = True
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=4))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(size_label))
        ax.set_yscale("log")
        ax.set_xlabel("dense tensor size (solid: encode, dashed: decode)")
        ax.set_ylabel("MB/s of encoded bytes (higher is better)")
        ax.set_title(title, fontsize="medium")
        ax.grid(True, which="both", alpha=0.3)
    dense.legend(fontsize="x-small")
    fig.suptitle(f"bench/serialization/run.sh: {context.get('num_cpus', '?')} CPUs, "
                 f"{context.get('date', '')[:10]}, one thread, CPU time", fontsize="medium")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"report.py: wrote {path}", file=sys.stderr)


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        raise SystemExit(__doc__)
    context, rows = read(args[0])
    if "--check" in args:
        sys.exit(0 if check(rows) else 1)
    print("Records (the seed's workload; the seed's figures in parentheses):\n")
    print(seed_table(rows))
    for workload in ("records", "tensor", "sparse", "tensor_nonfinite", "sparse_nonfinite"):
        print(f"\n{workload}:\n")
        print(table(rows, workload))
    if "--plot" in args:
        i = args.index("--plot")
        if i + 1 >= len(args):
            raise SystemExit("report.py: --plot takes a file name")
        plot(rows, context, args[i + 1])
    if not check(rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
