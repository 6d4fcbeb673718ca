#!/usr/bin/env python3
"""Kill-and-freeze trials: N jobs (1 scheduler, 2 servers, 3 workers), each with one random
process SIGKILLed or SIGSTOPped at a random moment, under pslaunch or started one by one.
Reports hangs, the seconds each surviving role took to exit (median, p90, max) by victim role
and signal, and how often the errors named the victim.

    bench/kill/run.py [--trials 100] [--seed 1] [--build build] [--keep DIR] [--env K=V ...]

Trial i uses seed SEED+i; `--seeds S ...` replays chosen trials (the seed is printed with each,
here and by the CI test). Launcher and signal cycle with the seed, so each pair gets a quarter
of the trials; victim and moment are drawn from the seed. The trial logic is tests/integration/kill_harness.py, shared
with the CI test. Exit status 1 if any trial hung or failed a check.
"""
import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import kill_harness as kh  # noqa: E402


def percentile(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def summary_rows(results):
    """(victim role, signal, survivor role) -> (count, median, p90, max) seconds to exit."""
    groups = {}
    for r in results:
        for n, t in r.exit_s.items():
            if t is not None:
                groups.setdefault((kh.role_of(r.plan.victim), r.plan.sig, kh.role_of(n)), []).append(t)
    return {k: (len(v), statistics.median(v), percentile(v, 0.9), max(v)) for k, v in sorted(groups.items())}


def print_summary(results):
    print("\nseconds from the signal to each survivor's exit (under pslaunch, pslaunch stops the others "
          "once one fails), against the bounds the job was given: heartbeat timeout "
          f"{kh.HEARTBEAT_TIMEOUT_MS / 1000:g} s, startup timeout {kh.STARTUP_TIMEOUT_MS / 1000:g} s, "
          f"a hang past {kh.DEADLINE_S:g} s:")
    print("| launcher | victim | signal | survivor | exits | median | p90 | max |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: |")
    for launcher in kh.LAUNCHERS:
        rows = summary_rows([r for r in results if r.plan.launcher == launcher])
        for (victim, sig, role), (n, med, p90, worst) in rows.items():
            print(f"| {launcher} | {victim} | {sig} | {role} | {n} | {med:.2f} | {p90:.2f} | {worst:.2f} |")
    phases = Counter(r.phase for r in results)
    print("\nphase at the signal: " + ", ".join(f"{k} {v}" for k, v in sorted(phases.items())))
    failing = [r for r in results if kh.failed(r)]
    named = [r for r in failing if kh.victim_named(r)]
    print(f"trials whose job failed: {len(failing)}; errors named the victim in {len(named)}")
    per_survivor = [v for r in results if r.plan.launcher == "one-by-one"
                    for n, v in r.named.items() if r.codes.get(n) not in (0, None)]
    print(f"one-by-one survivors that failed: {len(per_survivor)}, naming the victim: {sum(per_survivor)}")
    clean = sum(1 for r in results for c in r.codes.values() if c == 0)
    print(f"survivors that exited 0 (allowed only once their work was complete): {clean}")
    frozen = sum(r.waits_for_frozen_worker for r in results)
    print(f"pslaunch left waiting for a worker frozen after the job finished (not a hang: the job is done; "
          f"pslaunch --timeout bounds it): {frozen}")
    hung = [r for r in results if r.hung]
    print(f"hangs: {len(hung)}" + "".join(f"\n  {r.plan.describe()}: {r.hung}" for r in hung))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1, help="seed of the first trial")
    ap.add_argument("--seeds", type=int, nargs="*", help="replay these seeds")
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--keep", type=Path, help="keep every trial's output under this directory")
    ap.add_argument("--env", action="append", default=[], metavar="K=V",
                    help="a setting for every process, e.g. --env SYNCLINE_TRANSPORT=ucx (repeatable)")
    args = ap.parse_args()
    bin_dir = args.build / "bin"
    for b in ("pslaunch", "syncline-scheduler", "syncline-server", "syncline-example-training"):
        if not (bin_dir / b).exists():
            sys.exit(f"{bin_dir / b} is missing: build it first")
    plans = [kh.plan_trial(s) for s in (args.seeds or range(args.seed, args.seed + args.trials))]
    settings = dict(kv.split("=", 1) for kv in args.env)
    results, failed = [], 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kill-bench-") as tmp:
        base = args.keep or Path(tmp)
        for i, plan in enumerate(plans):
            r = kh.run_trial(plan, bin_dir, base / f"seed-{plan.seed}", settings)
            results.append(r)
            bad = kh.problems(r)
            failed += bool(bad)
            slowest = max((t for t in r.exit_s.values() if t is not None), default=0)
            print(f"[{i + 1}/{len(plans)}] {plan.describe()}: {r.phase}, all out in {slowest:.2f} s"
                  + (" (pslaunch waits for the frozen worker; the job finished)" if r.waits_for_frozen_worker else "")
                  + ("".join(f"\n    PROBLEM: {b}" for b in bad)), flush=True)
    print(f"\n{len(results)} trials in {time.monotonic() - started:.0f} s; {failed} with problems")
    print_summary(results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
