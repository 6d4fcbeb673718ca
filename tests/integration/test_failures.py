"""Bad input and failures with real processes: mismatched declarations, ports in use,
garbage on the wire, and nodes killed with SIGKILL mid-job."""
import os
import signal
import socket
import time

import pytest

from conftest import EXAMPLE, SCHEDULER, SERVER, clean_env, free_port, run_pslaunch, transport_env

import subprocess

HEARTBEAT = dict(SYNCLINE_HEARTBEAT_INTERVAL_MS=100, SYNCLINE_HEARTBEAT_TIMEOUT_MS=1500)


# The bad-input runs go over both data-plane transports; the scheduler always speaks ZeroMQ tcp.
BOTH = ["tcp", "ucx"]


@pytest.mark.parametrize("transport", BOTH)
def test_mismatched_declaration_is_a_clear_error(transport):
    script = f'if [ "$SYNCLINE_WORKER_RANK" = 0 ]; then exec {EXAMPLE} --tensors fp32:10; ' \
             f'else exec {EXAMPLE} --tensors fp16:10; fi'
    code, out = run_pslaunch(2, 1, ["/bin/sh", "-c", script], env=transport_env(transport), timeout=60)
    assert code != 0, out
    assert "mismatched declaration of tensor 'tensor0'" in out, out
    assert "fp16[10]" in out and "fp32[10]" in out, out


@pytest.mark.parametrize("transport", BOTH)
def test_scheduler_port_in_use_is_a_clear_error(transport):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([SCHEDULER], env=clean_env(SYNCLINE_ROLE="scheduler", SYNCLINE_SCHEDULER_PORT=port,
                                                         SYNCLINE_JOB_TOKEN="t", **transport_env(transport)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    assert proc.returncode != 0
    assert f"tcp://127.0.0.1:{port} is already in use" in proc.stdout, proc.stdout


@pytest.mark.parametrize("transport", BOTH)
def test_server_port_in_use_is_a_clear_error(transport):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([SERVER], env=clean_env(SYNCLINE_ROLE="server", SYNCLINE_PORT=port,
                                                      SYNCLINE_SCHEDULER_PORT=free_port(), **transport_env(transport)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    assert proc.returncode != 0
    assert f"address {transport}://127.0.0.1:{port} is already in use" in proc.stdout, proc.stdout


@pytest.mark.parametrize("transport", BOTH)
def test_bad_setting_is_a_clear_error(transport):
    proc = subprocess.run([SERVER], env=clean_env(SYNCLINE_ROLE="server", SYNCLINE_NUM_WORKERS="three",
                                                  **transport_env(transport)),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    assert proc.returncode != 0
    assert "SYNCLINE_NUM_WORKERS" in proc.stdout and "not an integer" in proc.stdout, proc.stdout


def test_scheduler_without_a_token_refuses_to_start_unless_allowed():
    env = dict(SYNCLINE_ROLE="scheduler", SYNCLINE_SCHEDULER_HOST="127.0.0.1", SYNCLINE_SCHEDULER_PORT=free_port(),
               SYNCLINE_STARTUP_TIMEOUT_MS=500)
    proc = subprocess.run([SCHEDULER], env=clean_env(**env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=30)
    assert proc.returncode != 0 and "no job token (SYNCLINE_JOB_TOKEN)" in proc.stdout, proc.stdout
    assert "listening at" not in proc.stdout, proc.stdout
    # Allowed explicitly, it listens (and, with nobody joining, times out).
    proc = subprocess.run([SCHEDULER], env=clean_env(SYNCLINE_ALLOW_NO_TOKEN=1, **env), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=30)
    assert "listening at" in proc.stdout and "no job token" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("transport", BOTH)
def test_unreachable_scheduler_is_named_with_the_refused_connection(transport):
    """A server pointed at a port where no scheduler listens says so when its wait ends, and on the way."""
    proc = subprocess.run([SERVER], env=clean_env(SYNCLINE_ROLE="server", SYNCLINE_SCHEDULER_HOST="127.0.0.1",
                                                  SYNCLINE_SCHEDULER_PORT=free_port(), SYNCLINE_STARTUP_TIMEOUT_MS=12000,
                                                  SYNCLINE_JOB_TOKEN="t", **transport_env(transport)),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert proc.returncode != 0
    out = proc.stdout
    assert "no word yet from the scheduler at" in out and "(its address: connection refused)" in out, out
    assert "did not start the job within 12000 ms (its address: connection refused)" in out, out
    assert "SYNCLINE_SCHEDULER_ADDRESS" in out, out


def test_unknown_transport_is_a_clear_error():
    proc = subprocess.run([SERVER], env=clean_env(SYNCLINE_ROLE="server", SYNCLINE_TRANSPORT="rdma"),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    assert proc.returncode != 0
    assert "SYNCLINE_TRANSPORT: 'rdma' is not one of ipc, tcp, ucx" in proc.stdout, proc.stdout


def test_ucx_without_an_rdma_device_is_a_clear_error():
    # UCX_TLS=rc asks UCX for InfiniBand/RoCE verbs alone.
    code, out = run_pslaunch(1, 1, [EXAMPLE, "--rounds", "2"], env={"SYNCLINE_TRANSPORT": "ucx", "UCX_TLS": "rc"},
                             timeout=60)
    if code == 0:
        pytest.skip("this machine has an RDMA device")
    assert "UCX found no usable transport (UCX_TLS=rc)" in out and "no RDMA" in out, out


def send_garbage(port, rounds=20):
    """Connects to 127.0.0.1:port and writes random bytes, `rounds` times."""
    for i in range(rounds):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            try:
                s.sendall(os.urandom(256 + 97 * i))
                if i % 2:  # a ZMTP-looking greeting followed by junk
                    s.sendall(b"\xff" + b"\x00" * 8 + b"\x7f\x03\x00NULL" + os.urandom(64))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the peer hung up on the garbage, as it should


@pytest.mark.parametrize("transport", BOTH)
def test_garbage_to_scheduler_and_server_ports_does_not_stop_the_job(cluster_factory, transport):
    c = cluster_factory(2, 1, **transport_env(transport))
    server_port = free_port()
    c.start_scheduler()
    c.start_server(0, SYNCLINE_PORT=server_port)
    assert c.wait_for_output("scheduler", "listening at", timeout=30), c.output("scheduler")
    assert c.wait_for_output("server 0", "server listening at", timeout=30), c.output("server 0")
    send_garbage(c.port)  # before the job starts
    send_garbage(server_port)
    args = ["--rounds", "1500", "--tensors", "fp32:20000,bf16:3000"]  # long enough to be hit while it runs
    c.start_worker(0, args)
    c.start_worker(1, args)
    assert c.wait_for_output("worker 0", "round 5/1500", timeout=60), c.output("worker 0")
    send_garbage(c.port)  # while it runs
    send_garbage(server_port)
    codes = c.wait_all(timeout=120)
    assert all(code == 0 for code in codes.values()), (codes, c.output("scheduler"), c.output("server 0"))
    assert "done: 1500 rounds" in c.output("worker 0")


# The data plane the kill tests run over: ZeroMQ tcp with payloads on the socket
# and in Syncline's shared memory, and UCX with its default transports and with
# shared memory alone (where UCX cannot report dead peers).
@pytest.mark.parametrize("transport", ["tcp", "shm", "ucx", "ucx-sm"])
@pytest.mark.parametrize("victim", ["worker 1", "server 1"])
def test_killed_node_ends_the_job_with_its_name(cluster_factory, victim, transport):
    c = cluster_factory(3, 2, **HEARTBEAT, **transport_env(transport))
    c.start_scheduler()
    server_ports = [free_port(), free_port()]
    for i in range(2):
        c.start_server(i, SYNCLINE_PORT=server_ports[i])
    for rank in range(3):
        c.start_worker(rank, ["--rounds", "1000000", "--quiet", "--tensors", "fp32:50000"])
    # Wait until the job runs (every worker joined), then kill the victim.
    for rank in range(3):
        assert c.wait_for_output(f"worker {rank}", "rounds", timeout=60), c.output(f"worker {rank}")
    time.sleep(0.5)
    proc, _ = c.procs[victim]
    os.killpg(proc.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    codes = c.wait_all(timeout=15)
    elapsed = time.monotonic() - killed_at
    survivors = {name: code for name, code in codes.items() if name != victim}
    assert all(code is not None for code in survivors.values()), f"hung: {survivors}"
    assert all(code != 0 for code in survivors.values()), survivors
    assert elapsed < 1.5 + 2.0, elapsed  # heartbeat timeout (1.5 s) plus detection tick and exit
    # Every process names the dead node: the worker by its rank, a server by its address
    # (server ranks follow registration order, which the test does not control).
    role, index = victim.split()
    dead = f"worker {index} (node" if role == "worker" else f"127.0.0.1:{server_ports[int(index)]}"
    for name in survivors:
        text = c.output(name)
        assert "presumed dead" in text and dead in text, (name, dead, text[-2000:])



# Issue 29: a local peer dies or freezes inside local reduce. Four workers on two emulated hosts
# (two each, labels "a" and "b"): each chunk of host "a" is pushed by worker 0 or worker 1 for
# both, so the victim's host peer waits on its part. The job ends within the bounds of a remote
# failure, every survivor names the victim.
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGSTOP"])
def test_a_dead_or_frozen_local_peer_ends_the_job_with_its_name(cluster_factory, sig):
    c = cluster_factory(4, 1, **HEARTBEAT)
    c.start_scheduler()
    c.start_server(0)
    for rank in range(4):
        c.start_worker(rank, ["--rounds", "1000000", "--quiet", "--tensors", "fp32:50000,fp16:3000"],
                       SYNCLINE_HOST_LABEL="ab"[rank // 2])
    for rank in range(4):
        assert c.wait_for_output(f"worker {rank}", "rounds", timeout=60), c.output(f"worker {rank}")
    # Registration put workers 0 and 1 on one host: the reduce the victim takes part in is local.
    assert "(host 0 of 2, local rank 1 of 2)" in c.output("worker 1"), c.output("worker 1")
    time.sleep(0.5)
    proc, _ = c.procs["worker 1"]
    os.killpg(proc.pid, getattr(signal, sig))
    hit_at = time.monotonic()
    codes = c.wait_all(timeout=15, skip={"worker 1"})  # a frozen victim never exits (the fixture kills it)
    elapsed = time.monotonic() - hit_at
    assert all(code is not None for code in codes.values()), f"hung: {codes}"
    assert all(code != 0 for code in codes.values()), codes
    assert elapsed < 1.5 + 2.0, elapsed  # heartbeat timeout (1.5 s) plus detection tick and exit
    for name in codes:
        text = c.output(name)
        assert "worker 1 (node" in text and "presumed dead" in text, (name, text[-2000:])
