#!/usr/bin/env python3
"""Memory soak: one busy local job (scheduler, 2 servers, 2 workers of syncline-example-training,
under pslaunch) pushes every dtype from 1 element to 64 MiB for --seconds on a data plane, while
every process's resident memory (VmRSS) is sampled each second. Reports, per process, RSS at
1 minute, at the end and its maximum, and the slope over the second half of training, with a
verdict: flat, or growing.

  bench/soak/run.py                                   # 600 s on tcp, then 600 s on shm
  bench/soak/run.py --planes shm --seconds 120 --env MALLOC_ARENA_MAX=2
  bench/soak/run.py --csv-dir /tmp/soak --svg docs/soak-memory.svg

Planes: tcp (SYNCLINE_SHM=0: payloads over loopback tcp) and shm (SYNCLINE_SHM=1: payloads in
shared memory, the default on one host). The example takes a round count, not a duration: a short
calibration job measures the seconds per round, and the soak runs duration / that many rounds,
so it stops by itself (pslaunch --timeout bounds it at twice the duration). The example checks
every pulled sum bit for bit; the soak requires every worker to print "done:" and pslaunch to
exit 0.

Flat means the second half of training grew by less than max(5 MiB, 2 % of the process's RSS):
glibc's allocator moves RSS by a few MiB as it trims and reuses 1 MiB chunk buffers, while a leak
of even 1 MiB (four default partitions) per 100 rounds, or of 100 bytes per message, exceeds that within
the half of a 10-minute run. Exit status 1 if the job failed or any process grew.
"""
import argparse
import csv
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from benchenv import clean_env  # noqa: E402
from kill_harness import pslaunch_children  # noqa: E402
import rss_svg  # noqa: E402

WORKERS, SERVERS = 2, 2
# Every dtype, from one element to 64 MiB (fp32:16777216); 79 MiB per worker per round.
DEFAULT_TENSORS = ("fp32:16777216,fp16:4194304,fp64:524288,bf16:1048577,fp32:65536,"
                   "fp16:1000,bf16:3,fp64:1,fp32:1")
CALIBRATION_ROUNDS = 12
# The example's stdout is a pipe, so block-buffered: stdbuf makes it print each round as it ends,
# which the calibration times and the progress lines count.
LINE_BUFFERED = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []
FLAT_MIB, FLAT_FRACTION = 5.0, 0.02
ROUND_RE = re.compile(r"^\[worker (\d+)\] round (\d+)/(\d+):")
DONE_RE = re.compile(r"^\[worker (\d+)\] done:")


class Job:
    """A pslaunch job whose output is read by a thread: rounds done per worker, when training
    ended (the first "done:"), and the whole log."""

    def __init__(self, bin_dir, plane, rounds, tensors, log_path, settings, timeout_s):
        env = clean_env({"SYNCLINE_LOG_LEVEL": "warn", **settings,
                         "SYNCLINE_SHM": "1" if plane == "shm" else "0"})
        argv = [str(bin_dir / "pslaunch"), "--workers", str(WORKERS), "--servers", str(SERVERS),
                "--timeout", str(int(timeout_s)), "--", *LINE_BUFFERED, str(bin_dir / "syncline-example-training"),
                "--rounds", str(rounds), "--tensors", tensors]
        self.start = time.monotonic()
        self.rounds, self.round_times, self.done = {}, [], set()
        self.done_s = None  # seconds from start to the first worker's "done:"
        self.log = open(log_path, "w")
        self.popen = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        self.pids = {}
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.popen.stdout:
            self.log.write(line)
            now = time.monotonic() - self.start
            m = ROUND_RE.match(line)
            if m:
                self.rounds[int(m.group(1))] = int(m.group(2))
                if m.group(1) == "0":
                    self.round_times.append(now)
            m = DONE_RE.match(line)
            if m:
                self.done.add(int(m.group(1)))
                if self.done_s is None:
                    self.done_s = now
        self.log.flush()

    def elapsed(self):
        return time.monotonic() - self.start

    def processes(self):
        """{name: pid} of the job's processes, once pslaunch has started them all."""
        if len(self.pids) < 1 + SERVERS + WORKERS and self.popen.poll() is None:
            self.pids = pslaunch_children(self.popen.pid)
        return self.pids

    def rounds_done(self):
        return min(self.rounds.values()) if len(self.rounds) == WORKERS else 0

    def wait(self, limit_s):
        try:
            return self.popen.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        """Ends every process of the job (each leads its own group), bounded."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in [*self.pids.values(), self.popen.pid]:
                try:
                    os.killpg(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            if self.wait(5) is not None:
                break
        self.reader.join(timeout=5)
        self.log.close()


def memory(pid):
    """(VmRSS, RssAnon, RssShmem) in MiB, or None once the process is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    kib = {k: int(v.split()[0]) for k, v in (l.split(":", 1) for l in text.splitlines() if ":" in l)
           if k in ("VmRSS", "RssAnon", "RssShmem")}
    if "VmRSS" not in kib:
        return None  # a zombie
    return tuple(kib.get(k, 0) / 1024.0 for k in ("VmRSS", "RssAnon", "RssShmem"))


def segments(pid):
    """MiB resident of each shared-memory outbox mapped by `pid` (its own and its peers')."""
    touched, current = [], False
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                if not line[0].isupper():  # a mapping's first line: address range, ..., name
                    current = "syncline-outbox" in line
                elif current and line.startswith("Rss:"):
                    touched.append(int(line.split()[1]) / 1024.0)
    except OSError:
        pass
    return touched


def calibrate(bin_dir, plane, tensors, settings, work_dir):
    """Seconds per round on this plane: worker 0's rounds past the first two (which pay for
    connections and first-touch page faults), over at least 2 s; a job of small tensors is run
    again with 20x the rounds until it lasts that long."""
    rounds = CALIBRATION_ROUNDS
    while True:
        log = work_dir / f"{plane}-calibration.log"
        job = Job(bin_dir, plane, rounds, tensors, log, settings, 300)
        try:
            code = job.wait(320)
        finally:
            job.stop()
        times = job.round_times
        if code != 0 or len(times) < rounds:
            sys.exit(f"{plane}: the calibration job failed (exit {code}); see {log}")
        span = times[-1] - times[2]
        if span >= 2 or rounds >= 10 ** 6:
            return max(span, 1e-3) / (rounds - 3)
        rounds *= 20


def soak(bin_dir, plane, seconds, tensors, settings, work_dir):
    per_round = calibrate(bin_dir, plane, tensors, settings, work_dir)
    rounds = max(10, int(seconds / per_round))
    print(f"{plane}: calibration {per_round * 1000:.0f} ms per round -> {rounds} rounds for {seconds:g} s",
          flush=True)
    job = Job(bin_dir, plane, rounds, tensors, work_dir / f"{plane}.log", settings, 2 * seconds + 60)
    samples = []  # (t_s, rounds, name, rss, anon, shmem)
    outboxes = {}  # name -> MiB touched of each mapped outbox, while training (every 10 s)
    next_report, next_smaps = 30, 10
    try:
        while job.popen.poll() is None and job.elapsed() < 2 * seconds + 90:
            t, done = job.elapsed(), job.rounds_done()
            for name, pid in sorted(job.processes().items()):
                m = memory(pid)
                if m:
                    samples.append((t, done, name, *m))
            if t >= next_smaps and job.done_s is None:
                outboxes = {name: segments(pid) for name, pid in job.processes().items()}
                next_smaps += 10
            if t >= next_report:
                latest = {s[2]: s[3] for s in samples if s[0] == t}
                print(f"  {plane} {t:5.0f} s: {done}/{rounds} rounds; RSS MiB " +
                      ", ".join(f"{n} {v:.0f}" for n, v in sorted(latest.items())), flush=True)
                next_report += 30
            time.sleep(max(0.0, 1.0 - (job.elapsed() - t)))
        code = job.wait(0.1)
    finally:
        job.stop()
    ok = code == 0 and job.done == set(range(WORKERS))
    return dict(plane=plane, rounds=rounds, done_rounds=job.rounds_done(), code=code, ok=ok,
                done_s=job.done_s, samples=samples, per_round=per_round, outboxes=outboxes, log=work_dir / f"{plane}.log")


def robust_slope(points):
    """Theil-Sen slope of (t_s, MiB) points in MiB per minute: the median of the slopes between
    every pair, so the one-second spikes of a transient 64 MiB buffer do not tilt it."""
    slopes = [(b[1] - a[1]) / (b[0] - a[0]) for i, a in enumerate(points) for b in points[i + 1:] if b[0] > a[0]]
    return 60.0 * statistics.median(slopes) if slopes else 0.0


def median_between(samples, col, lo, hi):
    values = [s[col] for s in samples if lo <= s[0] < hi]
    return statistics.median(values) if values else float("nan")


def binned(samples, col, width_s=10.0):
    """(bin centre, median) of each `width_s` bin of samples: the curve without its spikes."""
    bins = {}
    for s in samples:
        bins.setdefault(int(s[0] // width_s), []).append(s[col])
    return [((k + 0.5) * width_s, statistics.median(v)) for k, v in sorted(bins.items())]


def analyze(result):
    """Per process: RSS at 1 min and at the end of training (medians of the 20 s around them, so
    a transient buffer does not decide them), the max, anon and shmem at the end, and the second
    half's slope and growth (robust slope x half the training time), judged against the flat
    threshold. Training ends at the first "done:"; shutdown is left out."""
    end_s = result["done_s"] or max(s[0] for s in result["samples"])
    rows = {}
    for name in sorted({s[2] for s in result["samples"]}):
        mine = [s for s in result["samples"] if s[2] == name and s[0] <= end_s]
        if not mine:
            continue
        half = [s for s in mine if s[0] >= end_s / 2]
        slope = robust_slope(binned(half, 3))
        growth = slope * (end_s / 2) / 60.0
        # The heap alone: on shm, RSS also counts the shared-memory pages a process has touched.
        anon_growth = robust_slope(binned(half, 4)) * (end_s / 2) / 60.0
        end = median_between(mine, 3, end_s - 20, end_s + 1)
        limit = max(FLAT_MIB, FLAT_FRACTION * end)
        minute = min(60.0, end_s)  # a run shorter than a minute: its end
        rows[name] = dict(at_1min=median_between(mine, 3, minute - 10, minute + 10), end=end, max=max(s[3] for s in mine),
                          anon=median_between(mine, 4, end_s - 20, end_s + 1),
                          shmem=median_between(mine, 5, end_s - 20, end_s + 1), slope=slope, growth=growth,
                          anon_growth=anon_growth, limit=limit, flat=growth < limit)
    return end_s, rows


def report(result):
    end_s, rows = analyze(result)
    status = "sums exact, every worker printed done:" if result["ok"] else f"JOB FAILED (exit {result['code']})"
    lines = [f"### {result['plane']}: {result['done_rounds']}/{result['rounds']} rounds in {end_s:.0f} s "
             f"({end_s / max(1, result['done_rounds']) * 1000:.0f} ms per round; calibration "
             f"{result['per_round'] * 1000:.0f} ms); {status}", "",
             "| process | RSS at 1 min | at the end | max | end: anon / shmem | 2nd-half slope | 2nd-half growth "
             "| of it anon | verdict |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name, r in rows.items():
        verdict = "flat" if r["flat"] else f"GROWING (limit {r['limit']:.1f} MiB)"
        lines.append(f"| {name} | {r['at_1min']:.1f} | {r['end']:.1f} | {r['max']:.1f} | "
                     f"{r['anon']:.1f} / {r['shmem']:.1f} | {r['slope']:+.2f} MiB/min | {r['growth']:+.1f} MiB | "
                     f"{r['anon_growth']:+.1f} MiB | {verdict} |")
    touched = {n: v for n, v in result.get("outboxes", {}).items() if v}
    if touched:
        lines += ["", "Shared-memory outboxes mapped near the end of training, MiB touched of each (a process's "
                  "own, one per peer it sends to, and its peers'; each at most SYNCLINE_SHM_BYTES):"]
        lines += [f"- {n}: " + ", ".join(f"{m:.0f}" for m in sorted(v, reverse=True)) for n, v in sorted(touched.items())]
    return "\n".join(lines), result["ok"] and all(r["flat"] for r in rows.values())


def save(csv_dir, result):
    """PLANE.csv: one row per process per second (and a "#done" row); PLANE.json: the rest."""
    with open(csv_dir / f"{result['plane']}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "rounds", "process", "rss_mib", "anon_mib", "shmem_mib"])
        for t, done, name, rss, anon, shmem in result["samples"]:
            w.writerow([f"{t:.2f}", done, name, f"{rss:.2f}", f"{anon:.2f}", f"{shmem:.2f}"])
        if result["done_s"] is not None:
            w.writerow([f"{result['done_s']:.2f}", result["done_rounds"], "#done", 0, 0, 0])
    summary = {k: (str(v) if k == "log" else v) for k, v in result.items() if k != "samples"}
    (csv_dir / f"{result['plane']}.json").write_text(json.dumps(summary) + "\n")


def load(csv_dir, plane):
    """A result saved by save(), for --report-only."""
    result = json.loads((csv_dir / f"{plane}.json").read_text())
    result["samples"], result["done_s"] = [], None
    with open(csv_dir / f"{plane}.csv") as f:
        for r in csv.DictReader(f):
            if r["process"] == "#done":
                result["done_s"] = float(r["t_s"])
            else:
                result["samples"].append((float(r["t_s"]), int(r["rounds"]), r["process"], float(r["rss_mib"]),
                                          float(r["anon_mib"]), float(r["shmem_mib"])))
    result.setdefault("log", csv_dir / f"{plane}.log")
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--planes", default="tcp,shm", help="comma list of tcp, shm; run one after the other")
    ap.add_argument("--seconds", type=float, default=600, help="training time per plane")
    ap.add_argument("--tensors", default=DEFAULT_TENSORS, help="the example's --tensors")
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--env", action="append", default=[], metavar="K=V",
                    help="a setting for every process, e.g. --env SYNCLINE_PARTITION_BYTES=4194304 (repeatable)")
    ap.add_argument("--csv-dir", type=Path, default=Path("/tmp/syncline-soak"),
                    help="where PLANE.csv (one row per process per second) and the job logs go")
    ap.add_argument("--svg", type=Path, help="also draw RSS over time, one panel per plane, into this file")
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing: report (and draw) the planes saved in --csv-dir")
    args = ap.parse_args()
    bin_dir = args.build / "bin"
    for b in ("pslaunch", "syncline-scheduler", "syncline-server", "syncline-example-training"):
        if not (bin_dir / b).exists():
            sys.exit(f"{bin_dir / b} is missing: build it first")
    settings = dict(kv.split("=", 1) for kv in args.env)
    args.csv_dir.mkdir(parents=True, exist_ok=True)
    print(f"{WORKERS} workers, {SERVERS} servers; tensors {args.tensors}; settings {settings or 'default'}",
          flush=True)
    ok, panels = True, []
    for plane in [p for p in args.planes.split(",") if p]:
        if plane not in ("tcp", "shm"):
            sys.exit(f"unknown plane {plane}: tcp or shm")
        if args.report_only:
            result = load(args.csv_dir, plane)
        else:
            result = soak(bin_dir, plane, args.seconds, args.tensors, settings, args.csv_dir)
            save(args.csv_dir, result)
        text, good = report(result)
        ok &= good
        print("\n" + text + f"\n(samples: {args.csv_dir / plane}.csv, log: {result['log']})\n", flush=True)
        series, done = rss_svg.load(args.csv_dir / f"{plane}.csv")
        shm = "SYNCLINE_SHM=1" if plane == "shm" else "SYNCLINE_SHM=0"
        panels.append((f"{plane} ({shm}): {result['done_rounds']} rounds in {done or 0:.0f} s of training",
                       series, done))
    if args.svg and panels:
        rss_svg.write_svg(args.svg, panels)
        print(f"wrote {args.svg}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
