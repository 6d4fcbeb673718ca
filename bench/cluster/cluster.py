#!/usr/bin/env python3
"""Emulated cluster: run Syncline across K hosts that are network namespaces on
this machine, each behind a rate-limited link (tc tbf, both directions).

  cluster.py run-job [--colocate] [--rate 1gbit] [--workers-per-host L]
                                                   the verified 7-host job (5 hosts colocated)
  cluster.py bench [--rates 1gbit,5gbit,25gbit]    transport benchmark next to the link rate
  cluster.py exec --hosts K [--rate R] -- CMD...   CMD in every host ({addr}, {host}, {addrs} filled in)
  cluster.py cleanup [--run-id ID] [--stale]       remove what a killed run left behind

Needs root. Every run is bounded (--timeout) and removes its namespaces,
links and processes on every exit path. See docs/cluster.md.
"""
import argparse
import os
import signal
import statistics
import sys
import time

import jobs
import netcluster
import tcpprobe
from benchenv import machine_cpu_ticks  # bench/ is on the path since jobs
from netcluster import EmulatedCluster, Interrupted, NoPrivileges, format_rate, parse_rate

JOB_TENSORS = "fp32:1,fp16:4097,bf16:65537,fp64:30000,fp32:1048576"
EXIT_NO_PRIVILEGES = 77


def log(*args):
    print(*args, flush=True)


def sysctls(a):
    return {"net.ipv4.tcp_congestion_control": a.tcp_cc} if a.tcp_cc else {}


def emulated_cluster(a, hosts, rate):
    """The emulated cluster the command line asks for: `hosts` hosts, links at `rate`."""
    return EmulatedCluster(hosts, rate=rate, subnet=a.subnet, run_id=a.run_id, timeout=a.timeout,
                           keep_logs=a.keep_logs, sysctls=sysctls(a), queue_ms=a.queue_ms, peak_factor=a.peak_factor,
                           mtu=a.mtu)


def tail(text, lines=30):
    return "\n".join(text.splitlines()[-lines:])


# ---- run-job ------------------------------------------------------------------------------------

def run_job(a):
    layout = jobs.Layout(a.workers, a.servers, a.colocate, per_host=a.workers_per_host)
    command = [jobs.binary("syncline-example-training"), "--rounds", a.rounds, "--quiet", "--tensors", a.tensors]
    env = dict(a.env, **({"SYNCLINE_PARTITION_BYTES": a.partition_bytes} if a.partition_bytes else {}))
    with emulated_cluster(a, layout.hosts, a.rate) as c:
        log(f"emulated cluster {c.run_id}: {layout.hosts} hosts in {c.net}, links {format_rate(c.rate)} "
            f"each way (tbf); {a.workers} workers ({layout.per_host} per worker host), {a.servers} servers"
            f"{' colocated with workers' if a.colocate else ' on their own hosts'}")
        start = time.monotonic()
        job = jobs.start_job(c, layout, command, env, timeout=max(10, c.remaining() - 15))
        for row in jobs.describe(job):
            log("  " + row)
        codes = job.wait(c.remaining() - 10)
        elapsed = time.monotonic() - start
        problems = jobs.check_training(job, codes, a.rounds)
        for r in range(layout.workers):
            done = [line for line in jobs.worker_lines(job, r) if "done:" in line]
            log(f"[worker {r}] " + (done[-1] if done else "(no result)"))
        log("link counters (bytes through each shaper; up = host -> bridge):")
        for h in range(layout.hosts):
            s = c.link_stats(h)
            log(f"  host {h} {c.address(h):<12} up {s['up']['bytes'] / 1e6:10.3f} MB  "
                f"down {s['down']['bytes'] / 1e6:10.3f} MB  drops {s['up']['dropped'] + s['down']['dropped']}")
        if a.verbose or problems:
            for p in job.procs:
                log(f"---- {p.name} (host {p.host}) ----\n{tail(p.output(), 10000 if a.verbose else 30)}")
        if problems:
            log("FAILED: " + "; ".join(problems))
            return 1
        log(f"OK: {a.workers} workers verified every sum of {a.rounds} rounds, identical digests; "
            f"every process exited 0 ({elapsed:.1f} s)")
        return 0


# ---- bench --------------------------------------------------------------------------------------

def syncline_bench(c, layout, a, partition, in_flight):
    """One syncline-bench-worker job; returns {(rank, bytes): push+pull MB/s}."""
    command = [jobs.binary("syncline-bench-worker"), "--sizes", a.sizes, "--seconds", a.seconds,
               "--in-flight", in_flight]
    # Per size: --seconds, or the worker's 7 iterations (2 warm-up + 5) when they take longer: each
    # moves in_flight x size each way, at the link rate at best.
    per_byte = 8 / c.rate if c.rate else 1e-9
    budget = sum(max(a.seconds, 7 * in_flight * int(s) * per_byte * 2) + 5 for s in a.sizes.split(",")) + 60
    job = jobs.start_job(c, layout, command, dict(a.env, SYNCLINE_PARTITION_BYTES=partition), timeout=budget)
    codes = job.wait(budget + 10)
    if any(code != 0 for code in codes):
        raise RuntimeError("benchmark job failed: " + "; ".join(
            f"{p.name}: exit {code}\n{tail(p.output(), 15)}" for p, code in zip(job.procs, codes) if code != 0))
    return {(r, line["bytes"]): line["goodput_MBps"]
            for r, p in enumerate(job.workers) for line in jobs.goodput_lines(p.output())}


def tcp_payload_share(mtu):
    """The share of a link's bytes (Ethernet frames, as tbf counts them) that is TCP payload: 20 bytes of
    IP, 20 of TCP and 12 of timestamps per packet, 14 of Ethernet header."""
    return (mtu - 52) / (mtu + 14)


def human_bytes(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def per_direction_gbit(push_pull_mbps):
    return push_pull_mbps / 2 * 8e6 / 1e9


def bench(a):
    layout = jobs.Layout(a.workers, a.servers, a.colocate)
    sizes = [int(s) for s in a.sizes.split(",")]
    # A configuration is (partition bytes, tensors in flight).
    partitions = [(int(p), int(f)) for p in a.partition_bytes.split(",") for f in a.in_flight.split(",")]
    rates = [parse_rate(r) for r in a.rates.split(",")]
    cc = a.tcp_cc or open("/proc/sys/net/ipv4/tcp_congestion_control").read().strip()
    log(f"bench/cluster: {a.workers} workers, {a.servers} servers"
        f"{' colocated with workers' if a.colocate else ' on their own hosts'}, scheduler on its own host; "
        f"syncline-bench-worker --seconds {a.seconds}; median of {a.repeats} runs")
    if a.peak_factor != netcluster.PEAK_FACTOR:
        log(f"links' peak rate: {a.peak_factor} x their rate (default {netcluster.PEAK_FACTOR})")
    if a.env:
        log("settings of every Syncline process: " + " ".join(f"{k}={v}" for k, v in a.env.items()))
    log(f"machine: {os.cpu_count()} cores, load average {' '.join(open('/proc/loadavg').read().split()[:3])} "
        f"at the start; TCP congestion control in the hosts: {cc}")
    log("push+pull = 2 x in-flight x tensor bytes / iteration time (bench_worker's goodput_MBps); in flight = "
        "tensors of the size push_pulled at once, as a model's gradients are. Each direction is capped "
        "by the link, so per direction = push+pull / 2 is what is compared with the link rate.")
    log("raw TCP = the same traffic with plain sockets (every worker host sends to and receives from every "
        "server host at once, for --seconds), measured in the same run: what this machine's emulated network "
        f"delivers per worker per direction. With a {a.mtu}-byte MTU at most {tcp_payload_share(a.mtu):.3f} of the "
        "link rate is TCP payload.")
    results, raw_rows = [], []
    for bits in rates:
        with emulated_cluster(a, layout.hosts, bits) as c:
            raws, runs, busy, raw_busy = [], {p: [] for p in partitions}, [], []
            workers = [layout.worker_host(r) for r in range(layout.workers)]
            servers = [layout.server_host(j) for j in range(layout.servers)]
            for rep in range(a.repeats):
                b0, t0 = machine_cpu_ticks()
                raw = tcpprobe.exchange(c, workers, servers, a.seconds, timeout=a.seconds + 30)
                b1, t1 = machine_cpu_ticks()
                raw_busy.append((b1 - b0) / max(1, t1 - t0))
                raws.append(raw)
                line = f"  {format_rate(bits)} run {rep + 1}/{a.repeats}: raw TCP up/down per worker " + \
                    ", ".join(f"{u / 1e9:.2f}/{d / 1e9:.2f}" for u, d in raw.values()) + " Gbit/s"
                for p in partitions:
                    b0, t0 = machine_cpu_ticks()
                    found = syncline_bench(c, layout, a, *p)
                    b1, t1 = machine_cpu_ticks()
                    busy.append((b1 - b0) / max(1, t1 - t0))
                    runs[p].append(found)
                    line += f"; partition {human_bytes(p[0])} x{p[1]}: " + ", ".join(
                        f"{human_bytes(s)} {per_direction_gbit(min(found.get((r, s), 0) for r in range(a.workers))):.2f}"
                        for s in sizes)
                log(line)
            raw_up = statistics.median(min(u for u, _ in raw.values()) for raw in raws)
            raw_down = statistics.median(min(d for _, d in raw.values()) for raw in raws)
            raw_rows.append((bits, raw_up, raw_down, statistics.median(raw_busy), statistics.median(busy)))
            for p in partitions:
                for s in sizes:
                    per_worker = [statistics.median(run.get((r, s), 0.0) for run in runs[p]) for r in range(a.workers)]
                    results.append((bits, p, s, per_worker, min(raw_up, raw_down)))
    log("")
    log("| link (each way) | raw TCP up/down per worker, Gbit/s | raw / link | CPU busy during raw TCP | "
        "CPU busy during Syncline runs |")
    log("| --- | --- | --- | --- | --- |")
    for bits, up, down, raw_cpu, cpu in raw_rows:
        link = "unlimited" if bits is None else format_rate(bits)
        log(f"| {link} | {up / 1e9:.2f} / {down / 1e9:.2f} | "
            f"{'-' if bits is None else f'{min(up, down) / bits:.2f}'} | {raw_cpu:.0%} | {cpu:.0%} |")
    log("")
    log("| link (each way) | partition | in flight | tensor | push+pull MB/s per worker "
        "| per direction Gbit/s per worker | min / link | min / raw TCP |")
    log("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for bits, p, s, per_worker, raw_dir in results:
        gbit = [per_direction_gbit(g) for g in per_worker]
        link = "unlimited" if bits is None else format_rate(bits)
        vs_link = "-" if bits is None else f"{min(gbit) * 1e9 / bits:.2f}"
        log(f"| {link} | {human_bytes(p[0])} | {p[1]} | {human_bytes(s)} | {', '.join(f'{g:.0f}' for g in per_worker)} | "
            f"{', '.join(f'{g:.2f}' for g in gbit)} | {vs_link} | {min(gbit) * 1e9 / raw_dir:.2f} |")
    log("")
    for bits in (b for b in rates if b is not None):
        best = {}
        for b, p, s, per_worker, _ in results:
            if b == bits and s >= 1 << 20:
                ratio = per_direction_gbit(min(per_worker)) * 1e9 / bits
                if ratio > best.get(s, (0, 0))[0]:
                    best[s] = (ratio, p)
        log(f"best per direction / link at {format_rate(bits)}: " + ", ".join(
            f"{human_bytes(s)} {r:.2f} (partition {human_bytes(p[0])}, {p[1]} in flight)"
            for s, (r, p) in sorted(best.items())) +
            f"; >= 0.85 for every size >= 1 MiB: {'yes' if best and min(r for r, _ in best.values()) >= 0.85 else 'no'}")
    return 0


# ---- exec ---------------------------------------------------------------------------------------

def exec_all(a):
    argv = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not argv:
        raise SystemExit("cluster.py exec: a command is required (after --)")
    with emulated_cluster(a, a.hosts, a.rate) as c:
        addrs = ",".join(c.address(i) for i in range(a.hosts))
        procs = []
        for i in range(a.hosts):
            fill = {"host": i, "addr": c.address(i), "addrs": addrs}
            env = dict(jobs.clean_env(), SLC_HOST=i, SLC_ADDR=c.address(i), SLC_ADDRS=addrs, SLC_HOSTS=a.hosts)
            procs.append(c.start(i, [arg.format(**fill) for arg in argv], env, name=f"host-{i}"))
        codes = c.wait(procs, c.remaining() - 5)
        worst = 0
        for p, code in zip(procs, codes):
            for line in p.output().splitlines():
                log(f"[host {p.host} {c.address(p.host)}] {line}")
            if code != 0:
                log(f"cluster.py: host {p.host}: {'still running at the deadline' if code is None else f'exit status {code}'}")
                worst = worst or (124 if code is None else (code if code > 0 else 128 - code))
        return worst


def cleanup(a):
    removed = netcluster.cleanup(run_id=a.run_id, only_stale=a.stale)
    log(f"removed {len(removed)}: {' '.join(removed)}" if removed else "nothing to remove")
    left = netcluster.list_namespaces(netcluster.PREFIX + (a.run_id + "-" if a.run_id else ""))
    if left and not a.stale:
        log(f"cluster.py: still present: {' '.join(left)}")
        return 1
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def setting(text):
        name, eq, value = text.partition("=")
        if not eq or not name:
            raise argparse.ArgumentTypeError(f"'{text}' is not NAME=VALUE")
        return name, value

    def common(p, rate="1gbit", timeout=300, tcp_cc=None, with_env=True):
        p.add_argument("--rate", default=rate, help=f"link rate each way, e.g. 1gbit, 500mbit; none = unlimited (default {rate})")
        p.add_argument("--subnet", default=netcluster.DEFAULT_SUBNET, help="hosts' addresses (default %(default)s)")
        p.add_argument("--timeout", type=float, default=timeout, help="the whole run stops after this many seconds (default %(default)s)")
        p.add_argument("--run-id", help="name of this run's namespaces: slc-ID-* (default: random)")
        p.add_argument("--queue-ms", type=float, default=netcluster.QUEUE_LATENCY_MS,
                       help="each link's queue, in ms at the link rate (>= 256 KiB; default %(default)s)")
        p.add_argument("--peak-factor", type=float, default=netcluster.PEAK_FACTOR,
                       help="each link's peak rate, x its rate: how fast it catches up after a late timer "
                       "(default %(default)s; see docs/cluster.md)")
        p.add_argument("--tcp-cc", default=tcp_cc,
                       help="TCP congestion control in the hosts: one of net.ipv4.tcp_allowed_congestion_control "
                       f"(default: {tcp_cc or 'the machine default'})")
        p.add_argument("--mtu", type=int, default=1500,
                       help="every link's MTU (default %(default)s; training clusters often run 9000)")
        p.add_argument("--keep-logs", action="store_true", help="keep every process's output in /tmp/slc-ID-*")
        if with_env:
            p.add_argument("--env", action="append", default=[], type=setting, metavar="NAME=VALUE",
                           help="a setting for every Syncline process, e.g. SYNCLINE_TRANSPORT=ucx (repeatable)")

    p = sub.add_parser("run-job", help="the verified Syncline job across emulated hosts")
    common(p)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--workers-per-host", type=int, default=1,
                   help="workers on each worker host (one pslaunch --local-workers each; they reduce locally)")
    p.add_argument("--servers", type=int, default=2)
    p.add_argument("--colocate", action="store_true", help="servers on the worker hosts")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--tensors", default=JOB_TENSORS)
    p.add_argument("--partition-bytes", type=int, help="SYNCLINE_PARTITION_BYTES (default: Syncline's)")
    p.add_argument("--verbose", action="store_true", help="print every process's output")
    p.set_defaults(func=run_job)

    p = sub.add_parser("bench", help="the transport benchmark at several link rates")
    common(p, timeout=2700, tcp_cc="reno")  # docs/cluster.md: why reno
    p.add_argument("--rates", default="1gbit,5gbit,25gbit,none",
                   help="link rates to run at; none = unlimited links, this machine's CPU ceiling (default %(default)s)")
    p.add_argument("--sizes", default="65536,1048576,4194304,16777216")
    p.add_argument("--seconds", type=float, default=2.0, help="per size, and for the raw TCP reference (default %(default)s)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--servers", type=int, default=2)
    p.add_argument("--colocate", action="store_true")
    p.add_argument("--partition-bytes", default="65536,1048576",
                   help="SYNCLINE_PARTITION_BYTES values to run, comma-separated (default %(default)s)")
    p.add_argument("--in-flight", default="1,8",
                   help="tensors of each size push_pulled at once, comma-separated (default %(default)s)")
    p.set_defaults(func=bench)

    p = sub.add_parser("exec", help="run a command in every emulated host")
    common(p, timeout=60, with_env=False)
    p.add_argument("--hosts", type=int, required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    p.set_defaults(func=exec_all)

    p = sub.add_parser("cleanup", help="remove namespaces, links and processes of killed runs (slc-*)")
    p.add_argument("--run-id", help="only this run's")
    p.add_argument("--stale", action="store_true", help="only runs whose orchestrator is gone")
    p.set_defaults(func=cleanup)

    a = ap.parse_args(argv)
    if hasattr(a, "env"):
        a.env = dict(a.env)
        if a.cmd == "bench" and "SYNCLINE_PARTITION_BYTES" in a.env:
            ap.error("bench: give partitions with --partition-bytes, not --env")
    if getattr(a, "peak_factor", 2) <= 1:
        ap.error("--peak-factor must be above 1 (tc tbf needs a peak rate above the rate)")
    try:
        return a.func(a)
    except NoPrivileges as e:
        print(f"cluster.py: {e}", file=sys.stderr)
        return EXIT_NO_PRIVILEGES
    except Interrupted as e:
        print(f"cluster.py: {e}; everything was torn down", file=sys.stderr)
        return 124 if e.signum == signal.SIGALRM else 128 + e.signum
    except (netcluster.ClusterError, RuntimeError, FileNotFoundError, ValueError) as e:
        print(f"cluster.py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
