#!/usr/bin/env python3
"""Transport benchmark: push+pull goodput through real scheduler/server/worker
processes on this host, next to raw ZeroMQ between two processes measured in
the same run, with the ratios the targets are stated in.

  bench/transport/run.py                       # tcp, ipc, ucx-tcp and shm; 1 and 2 workers
  bench/transport/run.py --transports tcp --runs 5 --markdown docs/transport-results.md
  bench/transport/run.py --transports tcp,tcp+curve,shm,shm+curve --workers 1   # the cost of SYNCLINE_ENCRYPT

Goodput counts a worker's tensor bytes once per direction: 2 * bytes / time of
one push_pull (push and pull overlap per chunk). The raw reference is a
one-directional zero-copy PUSH/PULL stream, i.e. bytes moved per second between
two processes: the same unit. Medians over --runs runs.
"""
import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from benchenv import clean_env, json_lines  # noqa: E402

KIB, MIB = 1024, 1024 * 1024
DEFAULT_SIZES = [4 * KIB, 64 * KIB, 1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB]


def run_json(argv, env=None, timeout=600):
    out = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=timeout)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(argv)}\n{out.stdout[-3000:]}")
    return json_lines(out.stdout)


def raw_zmq(bin_dir, sizes, seconds):
    stream = {}
    for size in sizes:
        rows = run_json([str(bin_dir / "syncline-bench-raw-zmq"), "--mode", "stream", "--size", str(size),
                         "--seconds", str(seconds)])
        stream[size] = rows[0]["MBps"]
    ping = run_json([str(bin_dir / "syncline-bench-raw-zmq"), "--mode", "pingpong", "--size", str(4 * KIB)])
    return stream, ping[0]["round_trip_us"]


def ucx_built(build_dir):
    """Whether the build has the UCX transport (CMake writes it into syncline/config.h)."""
    config = Path(build_dir) / "syncline" / "config.h"
    return config.exists() and "#define SYNCLINE_HAVE_UCX 1" in config.read_text()


def syncline(bin_dir, transport, workers, sizes, seconds, partition_bytes=None):
    env = clean_env({"SYNCLINE_LOG_LEVEL": "warn"})
    if partition_bytes:
        env["SYNCLINE_PARTITION_BYTES"] = str(partition_bytes)
    argv = [str(bin_dir / "pslaunch"), "--workers", str(workers), "--servers", "1", "--timeout", "600"]
    # Every process here shares one machine, so shared memory would carry the
    # payloads of every transport: only the "shm" runs use it.
    # "+curve": the same with every connection encrypted (SYNCLINE_ENCRYPT=1, ZeroMQ's CURVE).
    if transport.endswith("+curve"):
        env["SYNCLINE_ENCRYPT"] = "1"
        transport = transport[:-len("+curve")]
    env["SYNCLINE_SHM"] = "1" if transport == "shm" else "0"
    if transport == "shm":
        transport = "tcp"
    if transport == "ucx-tcp":  # UCX held to its tcp transport, as on hosts without RDMA
        env["UCX_TLS"] = "tcp"
        transport = "ucx"
    argv += ["--transport", transport, "--", str(bin_dir / "syncline-bench-worker"),
             "--sizes", ",".join(map(str, sizes)), "--seconds", str(seconds)]
    rows = run_json(argv, env=env)
    goodput, rtt = {}, {}
    for size in sizes:
        mine = [r for r in rows if r.get("bytes") == size]
        if len(mine) != workers:
            sys.exit(f"{transport}: expected {workers} results for {size} bytes, got {mine}")
        goodput[size] = statistics.mean(r["goodput_MBps"] for r in mine)
        rtt[size] = statistics.mean(r["round_trip_us"] for r in mine)
    return goodput, rtt


def write_svg(path, sizes, series, title):
    """A small line chart (log2 x: size, linear y: MB/s) without plotting libraries."""
    w, h, left, bottom, top, right = 720, 420, 70, 50, 40, 170
    ymax = max(max(v.values()) for v in series.values()) * 1.1
    xs = {s: left + (w - left - right) * i / max(1, len(sizes) - 1) for i, s in enumerate(sizes)}
    def y(v):
        return h - bottom - (h - bottom - top) * v / ymax
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
           f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle">message size</text>',
           f'<text x="16" y="{(top + h - bottom) / 2}" transform="rotate(-90 16 {(top + h - bottom) / 2})" '
           f'text-anchor="middle">MB/s per worker</text>']
    for s in sizes:
        out.append(f'<text x="{xs[s]}" y="{h - bottom + 16}" text-anchor="middle">{human(s)}</text>')
    for k in range(6):
        v = ymax * k / 5
        out.append(f'<text x="{left - 6}" y="{y(v) + 4}" text-anchor="end">{v:.0f}</text>')
        out.append(f'<line x1="{left}" y1="{y(v)}" x2="{w - right}" y2="{y(v)}" stroke="#ddd"/>')
    for i, (name, values) in enumerate(series.items()):
        c = colors[i % len(colors)]
        pts = " ".join(f"{xs[s]:.1f},{y(values[s]):.1f}" for s in sizes)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"/>')
        out.append(f'<text x="{w - right + 10}" y="{top + 16 * i + 10}" fill="{c}">{name}</text>')
    out.append("</svg>")
    Path(path).write_text("\n".join(out) + "\n")


def human(size):
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.environ.get("SYNCLINE_BUILD_DIR", ROOT / "build"), type=Path)
    ap.add_argument("--transports", default="tcp,ipc,ucx-tcp,shm",
                    help="comma list of tcp, ipc, ucx (UCX_TLS as in the environment, else UCX's choice), ucx-tcp (UCX_TLS=tcp), shm; tcp+curve, ipc+curve, shm+curve: encrypted (SYNCLINE_ENCRYPT=1)")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.5, help="time per size per run")
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    ap.add_argument("--partition-bytes", type=int, help="SYNCLINE_PARTITION_BYTES of the jobs (default: Syncline's)")
    ap.add_argument("--markdown", type=Path, help="also write the tables to this file")
    ap.add_argument("--svg", type=Path, help="also draw goodput against size into this SVG file")
    args = ap.parse_args()
    bin_dir = args.build_dir / "bin"
    sizes = [int(s) for s in args.sizes.split(",")]
    transports = [t for t in args.transports.split(",") if t]
    if not ucx_built(args.build_dir):
        skipped = [t for t in transports if t.startswith("ucx")]
        if skipped:
            print(f"UCX is not built in {args.build_dir}: skipping {', '.join(skipped)}", file=sys.stderr)
        transports = [t for t in transports if not t.startswith("ucx")]
    worker_counts = [int(w) for w in args.workers.split(",")]

    raw_runs, raw_rtt_runs = [], []
    results = {(t, w): [] for t in transports for w in worker_counts}
    for run in range(args.runs):
        print(f"run {run + 1}/{args.runs} ...", file=sys.stderr, flush=True)
        stream, rtt = raw_zmq(bin_dir, sizes, args.seconds)
        raw_runs.append(stream)
        raw_rtt_runs.append(rtt)
        for t in transports:
            for w in worker_counts:
                results[(t, w)].append(syncline(bin_dir, t, w, sizes, args.seconds, args.partition_bytes))

    raw = {s: statistics.median(r[s] for r in raw_runs) for s in sizes}
    raw_rtt = statistics.median(raw_rtt_runs)
    partition = f"SYNCLINE_PARTITION_BYTES={args.partition_bytes}" if args.partition_bytes else "default partition"
    lines = [f"Medians of {args.runs} runs, {partition}; goodput in MB/s per worker (push+pull bytes / time); "
             f"ratio = goodput / raw ZeroMQ stream at the same size.", ""]
    header = "| size | raw zmq stream |" + "".join(f" {t}, {w}w | ratio |" for t in transports for w in worker_counts)
    lines += [header, "|" + " --- |" * (2 + 2 * len(transports) * len(worker_counts))]
    medians = {}
    for key, runs in results.items():
        medians[key] = ({s: statistics.median(r[0][s] for r in runs) for s in sizes},
                        {s: statistics.median(r[1][s] for r in runs) for s in sizes})
    for s in sizes:
        row = f"| {human(s)} | {raw[s]:.0f} |"
        for t in transports:
            for w in worker_counts:
                g = medians[(t, w)][0][s]
                row += f" {g:.0f} | {g / raw[s]:.2f} |"
        lines.append(row)
    lines += ["", f"4 KiB round trip: raw ZeroMQ ping-pong {raw_rtt:.0f} us"]
    for t in transports:
        for w in worker_counts:
            g, rtt = medians[(t, w)]
            parts = []
            if 4 * KIB in rtt:  # the ping-pong reference is 4 KiB: compare only that size
                parts.append(f"4 KiB push+pull {rtt[4 * KIB]:.0f} us ({rtt[4 * KIB] / raw_rtt:.1f}x raw)")
            if 64 * MIB in g and 4 * MIB in g:
                parts.append(f"64 MiB / 4 MiB goodput {g[64 * MIB] / g[4 * MIB]:.2f}")
            if parts:
                lines.append(f"- {t}, {w} worker(s): " + "; ".join(parts))
    for plain in ("tcp", "ipc", "shm"):
        if plain in transports and plain + "+curve" in transports:
            for w in worker_counts:
                ratios = [medians[(plain + "+curve", w)][0][s] / medians[(plain, w)][0][s] for s in sizes]
                lines.append(f"- encrypted (CURVE) vs plain {plain}, {w} worker(s), by size: " +
                             ", ".join(f"{human(s)} {r:.2f}x" for s, r in zip(sizes, ratios)))
    if "shm" in transports and "tcp" in transports:
        for w in worker_counts:
            ratios = [medians[("shm", w)][0][s] / medians[("tcp", w)][0][s] for s in sizes if s >= MIB]
            lines.append(f"- shared memory vs tcp, {w} worker(s), >= 1 MiB: " +
                         ", ".join(f"{r:.2f}x" for r in ratios))
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    if args.svg:
        series = {"raw ZeroMQ stream": raw}
        for (t, w), (g, _) in medians.items():
            series[f"{t}, {w} worker{'s' if w > 1 else ''}"] = g
        write_svg(args.svg, sizes, series, "Push+pull goodput per worker vs raw ZeroMQ (loopback)")


if __name__ == "__main__":
    main()
