#!/usr/bin/env python3
"""Runs every libFuzzer target for a million inputs (or --runs) and reports, per target:
inputs executed, time, inputs per second, crashes (sanitizer reports, traps, timeouts, leaks)
and peak resident memory.

    scripts/fuzz 0                      # builds build-fuzz (runs nothing for 0 s... then:)
    bench/fuzz/run.py [--runs 1000000] [--build build-fuzz] [TARGET ...]

Starts from each target's seed corpus (tests/fuzz/corpus/<target>.tar.gz) and lets the corpus
grow in a scratch directory. Exit status 1 if any target crashed; the crashing input is kept
in BUILD/crashes.
"""
import argparse
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ["wire", "key_store", "scheduler", "control_client", "compression"]


def run_target(build, target, runs):
    binary = build / "fuzz" / f"fuzz_{target}"
    if not binary.exists():
        sys.exit(f"{binary} is missing: build it with scripts/fuzz 0 (or cmake --build {build} --target fuzz_{target})")
    (build / "crashes").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        seeds, grown = Path(tmp, "seeds"), Path(tmp, "grown")
        seeds.mkdir()
        grown.mkdir()
        with tarfile.open(ROOT / "tests" / "fuzz" / "corpus" / f"{target}.tar.gz") as tar:
            tar.extractall(seeds)
        start = time.monotonic()
        proc = subprocess.run([str(binary), f"-runs={runs}", "-timeout=10", "-rss_limit_mb=2048",
                               "-print_final_stats=1", f"-artifact_prefix={build / 'crashes'}/{target}-",
                               str(grown), str(seeds)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        seconds = time.monotonic() - start
    log = proc.stdout.decode(errors="replace")
    (build / f"bench-fuzz-{target}.log").write_text(log)
    stat = dict(re.findall(r"^stat::(\w+):\s+(\d+)", log, re.M))
    crashed = proc.returncode != 0
    kind = ""
    if crashed:
        m = re.search(r"ERROR: (?:AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer): ([^\n]+)", log)
        kind = m.group(1) if m else f"exit {proc.returncode}"
    return {"target": target, "runs": int(stat.get("number_of_executed_units", 0)), "seconds": seconds,
            "peak_rss_mb": int(stat.get("peak_rss_mb", 0)), "crashed": crashed, "kind": kind,
            "new_units": int(stat.get("new_units_added", 0))}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--build", type=Path, default=ROOT / "build-fuzz")
    parser.add_argument("targets", nargs="*", default=TARGETS)
    args = parser.parse_args()
    print(f"{'target':16} {'inputs':>10} {'seconds':>8} {'inputs/s':>9} {'new units':>9} {'peak RSS':>9}  crashes")
    results = []
    for target in args.targets:
        r = run_target(args.build, target, args.runs)
        results.append(r)
        print(f"{r['target']:16} {r['runs']:>10} {r['seconds']:>8.1f} {r['runs'] / r['seconds']:>9.0f} "
              f"{r['new_units']:>9} {r['peak_rss_mb']:>6} MB  {1 if r['crashed'] else 0}"
              f"{'  (' + r['kind'] + ')' if r['crashed'] else ''}", flush=True)
    # Leaks: LeakSanitizer checks at the end of each run and after inputs that freed less than
    # they allocated; a leak ends the run like a crash, so 0 crashes means 0 leaks found.
    return 1 if any(r["crashed"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
