"""Prometheus metrics: Debian's real prometheus server scrapes every role of a local job.

pslaunch --metrics-port gives the scheduler, the servers and the workers consecutive ports;
prometheus scrapes them every second while the job runs, and the test reads what it stored
through its HTTP API. The synthetic workers push a known number of bytes, so the traffic and
round counters are checked exactly.
"""
import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import EXAMPLE, PSLAUNCH, clean_env, free_port

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
WORKERS, SERVERS, ROUNDS = 2, 2, 20
PARTITION_BYTES = 262144
TENSORS = "fp32:65536,fp32:1000"  # 256 KiB and 4000 bytes: one chunk each at PARTITION_BYTES
BYTES_PER_ROUND = 65536 * 4 + 1000 * 4


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def query(prom, expr):
    """Instant query through Prometheus's HTTP API: {instance: value}."""
    body = json.loads(http_get(f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
    assert body["status"] == "success", body
    return {r["metric"].get("instance", "") + "|" + r["metric"].get("peer", ""): float(r["value"][1])
            for r in body["data"]["result"]}


def by_instance(result):
    return {k.split("|")[0]: v for k, v in result.items()}


@pytest.fixture
def prometheus(tmp_path):
    if not Path(PROMETHEUS).exists():
        pytest.skip("Debian's prometheus is not installed (scripts/install-deps installs it)")
    base = free_port(1 + SERVERS + WORKERS)
    targets = [f"127.0.0.1:{p}" for p in range(base, base + 1 + SERVERS + WORKERS)]
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
        "scrape_configs:\n  - job_name: syncline\n    static_configs:\n"
        f"      - targets: {json.dumps(targets)}\n")
    web = f"127.0.0.1:{free_port()}"
    log = open(tmp_path / "prometheus.log", "w")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address={web}"], stdout=log, stderr=subprocess.STDOUT)
    prom = f"http://{web}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if "Ready" in http_get(f"{prom}/-/ready", timeout=1):
                    break
            except OSError:
                pass
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()
            assert time.monotonic() < deadline, "prometheus did not become ready in 30 s"
            time.sleep(0.2)
        # Scraping has begun once every target has an `up` series (0 until the job starts).
        while len(query(prom, "up")) < len(targets):
            assert time.monotonic() < deadline, "prometheus did not scrape in 30 s"
            time.sleep(0.2)
        yield prom, base, targets
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_prometheus_scrapes_every_role_with_exact_counts(prometheus):
    prom, base, targets = prometheus
    # The workers stay up 4 s after their last round: a few scrapes read the final counts.
    job = subprocess.run([PSLAUNCH, "-w", str(WORKERS), "-s", str(SERVERS), "--metrics-port", str(base), "--timeout",
                          "120", "--", EXAMPLE, "--rounds", str(ROUNDS), "--tensors", TENSORS, "--quiet",
                          "--linger", "4"], env=clean_env(SYNCLINE_PARTITION_BYTES=PARTITION_BYTES),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
    assert job.returncode == 0, job.stdout
    assert f"scheduler {base}, servers {base + 1}-{base + SERVERS}" in job.stdout, job.stdout

    # Range selections skip the staleness markers written once the job's targets went away.
    def last(name):
        return query(prom, f"last_over_time({name}[5m])")

    up = by_instance(query(prom, "max_over_time(up[5m])"))
    assert up == {t: 1.0 for t in targets}, up

    scheduler, servers, workers = targets[0], targets[1:1 + SERVERS], targets[1 + SERVERS:]
    roles = {k.split("|")[0]: v for k, v in query(prom, 'last_over_time(syncline_node_info{role="worker"}[5m])').items()}
    assert set(roles) == set(workers)
    assert set(by_instance(query(prom, 'last_over_time(syncline_node_info{role="server"}[5m])'))) == set(servers)
    assert set(by_instance(query(prom, 'last_over_time(syncline_node_info{role="scheduler"}[5m])'))) == {scheduler}

    # Exact traffic: the two workers share a host, so they sum locally first (local reduce): each
    # tensor is pushed and pulled by one of them, once per round, and the servers take one copy;
    # between them, the workers pass each chunk once (to its pusher) and each sum once (back).
    pushed = by_instance(last("syncline_pushed_bytes_total"))
    pulled = by_instance(last("syncline_pulled_bytes_total"))
    local = by_instance(last("syncline_local_reduce_sent_bytes_total"))
    assert sum(pushed[w] for w in workers) == ROUNDS * BYTES_PER_ROUND, pushed
    assert sum(pulled[w] for w in workers) == ROUNDS * BYTES_PER_ROUND, pulled
    assert all(pushed[w] > 0 for w in workers), ("one tensor each", pushed)
    assert sum(local[w] for w in workers) == 2 * ROUNDS * BYTES_PER_ROUND, local
    assert sum(pushed[s] for s in servers) == ROUNDS * BYTES_PER_ROUND, pushed
    assert sum(pulled[s] for s in servers) == ROUNDS * BYTES_PER_ROUND, pulled
    chunks = by_instance(last("syncline_pushed_chunks_total"))
    assert sum(chunks[w] for w in workers) == ROUNDS * 2, chunks

    rounds = by_instance(last("syncline_rounds_completed_total"))
    assert all(rounds[w] == ROUNDS * 2 for w in workers), rounds  # one per push_pull
    assert sum(rounds[s] for s in servers) == ROUNDS * 2, rounds  # one per key and round
    latency = by_instance(last("syncline_push_pull_seconds_count"))
    assert all(latency[w] == ROUNDS * 2 for w in workers), latency
    summation = by_instance(last("syncline_summation_seconds_count"))
    assert sum(summation[s] for s in servers) == ROUNDS * 2, summation

    # The scheduler heard from each of the 4 peers within the heartbeat timeout. A scrape that
    # came while the job was still registering, before ranks were given, names a peer by its node
    # id ("worker (node 3)"); the 5-minute range keeps those series too.
    ages = query(prom, "last_over_time(syncline_heartbeat_age_seconds[5m])")
    peers = [k.split("|")[1] for k in ages]
    ranked = sorted(p for p in peers if not re.fullmatch(r"(worker|server) \(node \d+\)", p))
    assert ranked == ["server 0", "server 1", "worker 0", "worker 1"], ages
    assert all(0 <= v < 10 for v in ages.values()), ages

    memory = by_instance(last("process_resident_memory_bytes"))
    assert set(memory) == set(targets) and all(v > 1e6 for v in memory.values()), memory
    errors = query(prom, "sum(last_over_time(syncline_errors_total[5m]))")
    assert list(errors.values()) == [0.0], errors
