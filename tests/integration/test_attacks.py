"""Attacks by a process outside the job (no token) against a live job: the job completes with
exact sums, and every forged message is counted in syncline_dropped_messages_total.

The outsider (bin/syncline-test-outsider, tests/integration/outsider.cc) knows only what any
local user can list: the job's process ids, their shared-memory descriptors under /proc and their
ports. docs/security.md names the test behind each promise."""
import os
import re
import socket
import subprocess
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from conftest import BIN, free_port, transport_env

OUTSIDER = str(BIN / "syncline-test-outsider")
WORKERS = 3
# The five-minute flood of docs/security.md: SYNCLINE_TEST_FLOOD_SECONDS=300 with rounds enough
# to outlast it (SYNCLINE_TEST_ATTACK_ROUNDS).
ROUNDS = int(os.environ.get("SYNCLINE_TEST_ATTACK_ROUNDS", 3000))
# tensor1's 400 KiB pushes go through shared memory (tensor0's 8 KiB ones too, after the first).
ARGS = ["--rounds", str(ROUNDS), "--tensors", "fp32:2000,fp32:100000"]
FLOOD_SECONDS = float(os.environ.get("SYNCLINE_TEST_FLOOD_SECONDS", 15))


def scrape(metrics_port):
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
        return r.read().decode()


def dropped(metrics_port, reason="unauthenticated"):
    text = scrape(metrics_port)
    m = re.search(r'^syncline_dropped_messages_total\{reason="' + reason + r'"\} (\S+)$', text, re.M)
    assert m, text
    return float(m.group(1))


def wait_dropped(metrics_port, before, sent, timeout=60):
    """The node's count of refused messages once it has taken in all `sent` (or at the deadline)."""
    deadline = time.monotonic() + timeout
    while (got := dropped(metrics_port) - before) < sent and time.monotonic() < deadline:
        time.sleep(0.1)
    return got


def rss_kib(pid, field="VmRSS"):
    """The process's resident memory now (VmRSS) or at its peak so far (VmHWM), in KiB."""
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M).group(1))


def outsider(*args):
    proc = subprocess.run([OUTSIDER, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=FLOOD_SECONDS + 120)
    assert proc.returncode == 0, proc.stdout
    return int(re.search(r"outsider: (\d+) messages", proc.stdout).group(1))


def start_job(cluster_factory, rounds=ROUNDS, linger_s=0, **settings):
    """`linger_s`: the workers stay up that long after their last round, so the job outlasts an
    attack whose length does not depend on the rounds."""
    c = cluster_factory(WORKERS, 1, **transport_env("shm"), **settings)
    args = ["--rounds", str(rounds), *ARGS[2:], "--linger", str(linger_s)]
    ports = {"server 0": free_port(), **{f"worker {r}": free_port() for r in range(WORKERS)}}
    metrics = {name: free_port() for name in ["scheduler", *ports]}
    c.start_scheduler(SYNCLINE_METRICS_PORT=metrics["scheduler"])
    c.start_server(0, SYNCLINE_PORT=ports["server 0"], SYNCLINE_METRICS_PORT=metrics["server 0"])
    for r in range(WORKERS):
        name = f"worker {r}"
        c.start_worker(r, args, SYNCLINE_PORT=ports[name], SYNCLINE_METRICS_PORT=metrics[name])
    for r in range(WORKERS):
        assert c.wait_for_output(f"worker {r}", f"round 5/{rounds}", timeout=120), c.output(f"worker {r}")
    return c, ports, metrics


def assert_job_completes_exactly(c, timeout=300, rounds=ROUNDS):
    codes = c.wait_all(timeout=timeout)
    outputs = {name: c.output(name)[-3000:] for name in codes}
    assert all(code == 0 for code in codes.values()), (codes, outputs)
    for r in range(WORKERS):
        assert f"done: {rounds} rounds" in c.output(f"worker {r}"), outputs  # every round's sum checked exactly


def test_references_to_the_jobs_shared_memory_open_nothing(cluster_factory):
    """Headers naming every memfd of every job process, in the names of the job's nodes: before
    issue 28 they made nodes map other peers' segments (stalling the job) and release slots whose
    bytes were still unread (wrong sums)."""
    c, ports, metrics = start_job(cluster_factory)
    pids = [str(proc.pid) for name, (proc, _) in c.procs.items() if name != "scheduler"]
    for name, port in ports.items():
        before = dropped(metrics[name])
        sent = outsider("--to", f"tcp://127.0.0.1:{port}", "--senders", WORKERS + 1,
                        *[a for pid in pids for a in ("--segments-of", pid)])
        assert sent > 0, "the outsider found no shared-memory segment to name"
        assert wait_dropped(metrics[name], before, sent) == sent, name  # each one refused, none held or acted on
    assert_job_completes_exactly(c)


def test_heartbeats_from_ever_new_ids_leave_no_memory_behind(cluster_factory):
    """Before issue 28, every such heartbeat left a record per claimed sender, made before the
    proof was checked: each 300,000 of them grew a server by ~19 MiB for good, flood after flood.
    A flood also costs buffers on its way in, which the allocator keeps, once, at whichever flood
    first finds the job warm (a CI run saw 17 MiB of it at the second). So the test sends four
    floods of new ids and asks that at least one of the last three grow the server by less than
    half of what its records alone would take: a leak grows it at every one. The job lingers 20 s
    after its rounds, so the server is still there for the last flood."""
    c, ports, metrics = start_job(cluster_factory, linger_s=20)
    server = c.procs["server 0"][0].pid
    rss = []
    for batch in range(4):
        before = dropped(metrics["server 0"])
        sent = outsider("--to", f"tcp://127.0.0.1:{ports['server 0']}", "--fresh-senders", 300000,
                        "--first-sender", 100000 + 300000 * batch)
        assert wait_dropped(metrics["server 0"], before, sent) == sent
        rss.append(rss_kib(server))
    growths = [later - earlier for earlier, later in zip(rss, rss[1:])]
    assert min(growths) < 8 * 1024, f"every flood of 300,000 new ids grew the server (RSS {rss} KiB)"
    assert_job_completes_exactly(c)


def trickle(port, stop, lines=600):
    """A scraper that never finishes its request: one header line every 0.5 s (at most `lines`)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\n")
            for i in range(lines):
                if stop.wait(0.5):
                    return
                s.sendall(f"X-Slow-{i}: 1\r\n".encode())
    except OSError:
        pass  # dropped by the node, as it should be


def test_slow_scrapers_do_not_keep_a_finished_job_alive(cluster_factory):
    """Before issue 28, six clients per metrics port trickling one header line every 0.5 s kept
    every node from exiting after the job's work was done."""
    c, ports, metrics = start_job(cluster_factory)
    stop = threading.Event()
    clients = [threading.Thread(target=trickle, args=(port, stop), daemon=True)
               for port in metrics.values() for _ in range(6)]
    for t in clients:
        t.start()
    try:
        # The rest of the job takes seconds; the trickling would go on for 300 s.
        assert_job_completes_exactly(c, timeout=90)
    finally:
        stop.set()
        for t in clients:
            t.join(timeout=10)


def test_a_huge_frame_is_never_buffered(cluster_factory):
    """Every node's socket refuses, as it arrives, a frame larger than it could need: the scheduler
    takes only headers (at most 1 MiB), servers and workers a header or one chunk of the job's
    largest (4 MiB here). Before issue 28 each buffered up to 16 GiB from anyone, then dropped it.
    Each outsider waits out its 5 s flush (the frame never leaves), longer than the job's rounds may
    take: the job lingers 20 s."""
    c, ports, metrics = start_job(cluster_factory, linger_s=20)
    targets = {"scheduler": c.port, **ports}
    pids = {name: c.procs[name][0].pid for name in targets}
    peaks = {name: rss_kib(pid, "VmHWM") for name, pid in pids.items()}
    with ThreadPoolExecutor(len(targets)) as pool:  # all at once: each waits out its flush
        list(pool.map(lambda port: outsider("--to", f"tcp://127.0.0.1:{port}", "--big-frame-mib", 256),
                      targets.values()))
    for name, pid in pids.items():
        assert c.procs[name][0].poll() is None, (name, c.output(name)[-3000:])
        grown = rss_kib(pid, "VmHWM") - peaks[name]
        assert grown < 64 * 1024, f"the peak memory of the {name} grew by {grown} KiB"
    assert_job_completes_exactly(c)


def oldest_heartbeat(metrics_port):
    """The longest the scheduler has not heard from any node, in seconds."""
    return max(float(v) for v in re.findall(r"^syncline_heartbeat_age_seconds\{[^}]*\} (\S+)$",
                                            scrape(metrics_port), re.M))


def test_floods_do_not_starve_heartbeats(cluster_factory):
    """Three outsiders flood the scheduler, the server and a worker at full speed with heartbeats in
    the names of the job's nodes, each with a made-up proof the receiver must check, while the job
    beats every 0.25 s with a 3 s timeout: no live node is declared dead, every flooded message is
    counted, and the job completes exactly. (docs/security.md: the same for five minutes.)"""
    # The job must outlast the flood: 3000 rounds took under 15 s of it in one CI run.
    rounds = max(ROUNDS, int(FLOOD_SECONDS * 1000))
    c, ports, metrics = start_job(cluster_factory, rounds, SYNCLINE_HEARTBEAT_INTERVAL_MS=250,
                                  SYNCLINE_HEARTBEAT_TIMEOUT_MS=3000)
    flooded = {"scheduler": c.port, "server 0": ports["server 0"], "worker 0": ports["worker 0"]}
    before = {name: dropped(metrics[name]) for name in flooded}
    oldest = 0.0
    with ThreadPoolExecutor(len(flooded)) as pool:
        floods = [pool.submit(outsider, "--to", f"tcp://127.0.0.1:{port}", "--senders", WORKERS + 1,
                              "--flood-seconds", FLOOD_SECONDS) for port in flooded.values()]
        # The scheduler's view of the nodes meanwhile (while the job lasts).
        while not all(f.done() for f in floods) and all(p.poll() is None for p, _ in c.procs.values()):
            oldest = max(oldest, oldest_heartbeat(metrics["scheduler"]))
            time.sleep(0.2)
        sent = dict(zip(flooded, (f.result() for f in floods)))
    ended = {name: c.output(name)[-2000:] for name, (p, _) in c.procs.items() if p.poll() is not None}
    assert not ended, ("the job ended during the flood (give it more rounds)", ended)
    for name, count in before.items():
        assert wait_dropped(metrics[name], count, sent[name]) == sent[name], name
    print(f"flood of {FLOOD_SECONDS:.0f} s: {sent} messages; oldest heartbeat at the scheduler {oldest:.2f} s")
    assert oldest < 3.0
    assert_job_completes_exactly(c, rounds=rounds)
