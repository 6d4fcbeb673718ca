"""Syncline across emulated hosts (bench/cluster): network namespaces joined by a
bridge, each behind a rate-limited link. A 7-host job with exact sums, the link
limit really enforced in both directions, and teardown leaving no namespace, link
or process behind, also after Ctrl-C, the deadline, or a SIGKILLed orchestrator.

Needs root (network namespaces); skipped with the reason elsewhere."""
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLUSTER_DIR = REPO / "bench" / "cluster"
sys.path.insert(0, str(CLUSTER_DIR))

import jobs  # noqa: E402
import netcluster  # noqa: E402
import tcpprobe  # noqa: E402

CLUSTER = [sys.executable, str(CLUSTER_DIR / "cluster.py")]
UNAVAILABLE = netcluster.probe()
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None,
                                reason=f"emulated cluster tests skipped: {UNAVAILABLE}")


def run_id():
    return os.urandom(3).hex()


def leftovers(rid):
    """Everything of run `rid` still on the machine."""
    prefix = f"{netcluster.PREFIX}{rid}-"
    found = netcluster.list_namespaces(prefix) + netcluster.list_root_links(prefix)
    if (netcluster.STATE_DIR / f"{rid}.json").exists():
        found.append(f"state file {rid}.json")
    found += [str(p) for p in Path("/tmp").glob(f"{prefix}*")]
    return found


def namespace_inodes(rid):
    return {os.stat(f"/run/netns/{ns}").st_ino for ns in netcluster.list_namespaces(f"{netcluster.PREFIX}{rid}-")}


def processes_in(inodes):
    """Live (not zombie) processes whose network namespace is one of `inodes`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino in inodes and \
                    Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(f"{pid} {Path(f'/proc/{pid}/cmdline').read_text().replace(chr(0), ' ')[:120]}")
        except OSError:
            pass
    return found


def start_long_job(rid, *extra):
    """A run-job that would run for minutes: something to interrupt."""
    return subprocess.Popen([*CLUSTER, "run-job", "--run-id", rid, "--rounds", "100000", "--timeout", "120", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def runs_training(pid):
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False
    return argv0.endswith(b"syncline-example-training")


def wait_for_workers(rid, proc, colocate=False, timeout=60):
    """Waits until every worker host of run-job's default job runs its training process;
    returns the namespaces' inodes."""
    layout = jobs.Layout(4, 2, colocate)
    hosts = [f"{netcluster.PREFIX}{rid}-h{layout.worker_host(r)}" for r in range(layout.workers)]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        if all(any(runs_training(pid) for pid in netcluster.namespace_pids(ns)) for ns in hosts):
            return namespace_inodes(rid)
        time.sleep(0.2)
    raise AssertionError("the workers did not start")


@contextlib.contextmanager
def running_long_job(*extra):
    """A run-job that would run for minutes (something to interrupt), once its workers run:
    yields (run id, process, namespace inodes); afterwards its processes and namespaces
    are removed whatever the test did."""
    rid = run_id()
    proc = start_long_job(rid, *extra)
    try:
        yield rid, proc, wait_for_workers(rid, proc, colocate="--colocate" in extra)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        netcluster.cleanup(run_id=rid)


def assert_nothing_left(rid, inodes):
    assert leftovers(rid) == []
    assert processes_in(inodes) == []


def check_job_output(out, workers, rounds):
    assert "OK:" in out, out
    assert len(re.findall(rf"\[worker \d\] done: {rounds} rounds", out)) == workers, out
    digests = re.findall(r"result digest ([0-9a-f]{16})", out)
    assert len(digests) == workers and len(set(digests)) == 1, out


def test_seven_hosts_exact_sums():
    # 1 scheduler + 2 servers + 4 workers, each on its own emulated host behind a 1 Gbit/s link.
    rid = run_id()
    proc = subprocess.run([*CLUSTER, "run-job", "--run-id", rid, "--rate", "1gbit", "--timeout", "200"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout
    check_job_output(proc.stdout, workers=4, rounds=30)
    assert "7 hosts" in proc.stdout, proc.stdout
    for h in range(7):
        assert f"10.213.0.{h + 1}" in proc.stdout
    # Every byte between hosts went through the shapers: each worker pushed and pulled
    # its 4.4 MiB x 30 rounds (plus headers) over its own link.
    up_down = re.findall(r"host ([3-6]) \S+ +up +([\d.]+) MB +down +([\d.]+) MB", proc.stdout)
    assert len(up_down) == 4 and all(float(u) > 130 and float(d) > 130 for _, u, d in up_down), proc.stdout
    assert leftovers(rid) == []


def worker_host_bytes_up(out):
    """{host: MB sent} of the hosts that ran workers, from run-job's link counters."""
    hosts = {int(h) for h in re.findall(r"^  worker \d+ +host (\d+) ", out, re.M)}
    return {int(h): float(u) for h, u in re.findall(r"host (\d+) \S+ +up +([\d.]+) MB", out) if int(h) in hosts}


def test_hosts_of_two_workers_send_one_copy_of_each_gradient():
    # Issue 29: 4 workers, 2 on each of 2 worker hosts, 2 server hosts. With local reduce (the
    # default) a host's two workers sum each chunk between them and one copy leaves the host each
    # way; flat (SYNCLINE_LOCAL_REDUCE=0), each pushes its own: twice the bytes on the host's link.
    # Both check every sum exactly.
    sent = {}
    for mode, extra in (("hierarchical", []), ("flat", ["--env", "SYNCLINE_LOCAL_REDUCE=0"])):
        rid = run_id()
        proc = subprocess.run([*CLUSTER, "run-job", "--run-id", rid, "--workers", "4", "--workers-per-host", "2",
                               "--timeout", "200", *extra],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
        assert proc.returncode == 0, proc.stdout
        check_job_output(proc.stdout, workers=4, rounds=30)
        assert "5 hosts" in proc.stdout and "(2 per worker host)" in proc.stdout, proc.stdout
        sent[mode] = worker_host_bytes_up(proc.stdout)
        assert sorted(sent[mode]) == [3, 4], proc.stdout
        assert leftovers(rid) == []
    # One copy: 4.4 MiB x 30 rounds (plus headers) from each worker host; flat sends two.
    for host in (3, 4):
        assert 130 < sent["hierarchical"][host] < 200, sent
        assert 0.4 < sent["hierarchical"][host] / sent["flat"][host] < 0.6, sent


def test_servers_colocated_with_workers():
    rid = run_id()
    proc = subprocess.run([*CLUSTER, "run-job", "--run-id", rid, "--colocate", "--rounds", "10", "--timeout", "200"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout
    check_job_output(proc.stdout, workers=4, rounds=10)
    assert "5 hosts" in proc.stdout and "colocated" in proc.stdout, proc.stdout
    assert leftovers(rid) == []


def test_link_rate_is_enforced_both_ways():
    rate = 400e6
    nbytes = 25_000_000
    at_rate = nbytes * 8 / rate  # 0.5 s
    with netcluster.EmulatedCluster(3, rate="400mbit", timeout=120) as c:
        # Both links limited.
        elapsed = tcpprobe.transfer(c, 0, 1, nbytes)
        assert elapsed >= 0.9 * at_rate, (elapsed, at_rate)
        stats = c.link_stats(0)["up"], c.link_stats(1)["down"]
        assert all(s["qdisc"] == "tbf" and s["bytes"] >= nbytes for s in stats), stats
        # The sender's link unlimited: the receiver's downlink alone still holds the rate.
        c.set_rate(None, hosts=[0])
        elapsed = tcpprobe.transfer(c, 0, 1, nbytes, port=5203)
        assert elapsed >= 0.9 * at_rate, (elapsed, at_rate)
        # ...and so does the sender's uplink alone.
        c.set_rate("400mbit", hosts=[0])
        c.set_rate(None, hosts=[1])
        elapsed = tcpprobe.transfer(c, 0, 1, nbytes, port=5204)
        assert elapsed >= 0.9 * at_rate, (elapsed, at_rate)
        # Without the limit the same transfer is much faster: the check above can fail.
        c.set_rate(None)
        elapsed = tcpprobe.transfer(c, 0, 1, nbytes, port=5205)
        assert elapsed < 0.5 * at_rate, (elapsed, at_rate)
        rid = c.run_id
    assert leftovers(rid) == []


def test_cleanup_after_a_killed_orchestrator():
    with running_long_job() as (rid, proc, inodes):
        os.kill(proc.pid, signal.SIGKILL)  # no teardown: namespaces and processes stay
        proc.wait(timeout=10)
        assert netcluster.list_namespaces(f"{netcluster.PREFIX}{rid}-"), "a SIGKILLed run should leave its namespaces"
        done = subprocess.run([*CLUSTER, "cleanup", "--run-id", rid], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=60)
        assert done.returncode == 0, done.stdout
        assert f"slc-{rid}-br" in done.stdout, done.stdout
        assert_nothing_left(rid, inodes)


def test_next_cluster_removes_a_killed_runs_leftovers():
    with running_long_job("--colocate") as (rid, proc, inodes):
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        with netcluster.EmulatedCluster(1, timeout=30):
            pass  # creating any cluster first removes runs whose orchestrator is gone
        assert_nothing_left(rid, inodes)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_tears_down(sig):
    with running_long_job() as (rid, proc, inodes):
        os.kill(proc.pid, sig)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 128 + sig, out
        assert "torn down" in out, out
        assert_nothing_left(rid, inodes)


def test_run_stops_by_itself_at_its_timeout():
    start = time.monotonic()
    with running_long_job("--timeout", "25") as (rid, proc, inodes):
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode != 0 and time.monotonic() - start < 35, out
        assert "FAILED" in out, out
        assert_nothing_left(rid, inodes)


def test_deadline_interrupts_a_stuck_orchestrator():
    # The cluster's alarm fires even if the code using it blocks without a deadline.
    start = time.monotonic()
    with pytest.raises(netcluster.Interrupted, match="deadline"):
        with netcluster.EmulatedCluster(2, timeout=3) as c:
            c.start(1, ["sleep", "100"])
            inodes = namespace_inodes(c.run_id)
            time.sleep(60)
    assert time.monotonic() - start < 15
    assert_nothing_left(c.run_id, inodes)


def test_failing_command_is_reported_and_cleaned_up():
    rid = run_id()
    proc = subprocess.run([*CLUSTER, "exec", "--hosts", "3", "--run-id", rid, "--", "sh", "-c",
                           "echo host {host} at $SLC_ADDR; exit {host}"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout
    for h in range(3):
        assert f"[host {h} 10.213.0.{h + 1}] host {h} at 10.213.0.{h + 1}" in proc.stdout, proc.stdout
    assert "host 2: exit status 2" in proc.stdout, proc.stdout
    assert leftovers(rid) == []


@pytest.mark.skipif(not os.access("/usr/bin/python3", os.X_OK) or not os.access("/usr/bin/setpriv", os.X_OK),
                    reason="needs /usr/bin/python3 and setpriv to run as an unprivileged user")
def test_without_privileges_it_says_so():
    proc = subprocess.run(["/usr/bin/setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                           "/usr/bin/python3", str(CLUSTER_DIR / "cluster.py"), "exec", "--hosts", "2", "--", "true"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert proc.returncode == 77, proc.stdout
    assert "needs root" in proc.stdout, proc.stdout
