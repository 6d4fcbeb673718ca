"""A real job on one host: 1 scheduler + 2 servers + 3 workers as processes on 127.0.0.1,
results checked against exact expected sums by every worker."""
import re

import pytest

from conftest import EXAMPLE, UCX_VARIANTS, run_pslaunch, transport_env

ALL_DTYPES_SMALL_TO_MEDIUM = "fp32:1,fp64:1,fp16:1,bf16:1,fp32:1000,fp16:4097,bf16:65537,fp64:30000,fp32:262144"


def digests(output):
    return re.findall(r"result digest ([0-9a-f]{16})", output)


@pytest.mark.parametrize("transport", ["tcp", "ipc", "shm", *UCX_VARIANTS])
def test_many_rounds_every_dtype_exact(transport):
    env = transport_env(transport)
    code, out = run_pslaunch(3, 2, [EXAMPLE, "--rounds", "120", "--quiet", "--tensors", ALL_DTYPES_SMALL_TO_MEDIUM],
                             env={**env, "SYNCLINE_PARTITION_BYTES": 65536})
    assert code == 0, out
    assert out.count("round 120/120") == 3, out
    assert out.count("done: 120 rounds") == 3, out
    assert len(set(digests(out))) == 1, out  # every worker pulled the same bits


@pytest.mark.parametrize("transport", ["tcp", "ipc", "shm"])
def test_encrypted_job_is_exact(transport):
    """SYNCLINE_ENCRYPT=1: every connection under ZeroMQ's CURVE, sums as exact as without."""
    env = {**transport_env(transport), "SYNCLINE_ENCRYPT": 1, "SYNCLINE_PARTITION_BYTES": 65536}
    code, out = run_pslaunch(3, 2, [EXAMPLE, "--rounds", "30", "--quiet", "--tensors", ALL_DTYPES_SMALL_TO_MEDIUM],
                             env=env)
    assert code == 0, out
    assert out.count("done: 30 rounds") == 3, out
    assert len(set(digests(out))) == 1, out
    assert "|curve:" in out, out  # the nodes' addresses carry their CURVE keys


def test_encryption_over_ucx_is_refused_with_the_reason():
    code, out = run_pslaunch(2, 1, [EXAMPLE, "--rounds", "1"],
                             env={"SYNCLINE_TRANSPORT": "ucx", "SYNCLINE_ENCRYPT": 1}, timeout=120)
    assert code != 0, out
    assert "UCX traffic is not encrypted" in out, out


@pytest.mark.parametrize("transport", ["default", "ucx-tcp", "ucx-sm"])
def test_64mib_tensors_of_every_dtype(transport):
    tensors = "fp32:16777216,fp16:33554432,bf16:33554432,fp64:8388608"  # 64 MiB each
    env = transport_env(transport)
    code, out = run_pslaunch(3, 2, [EXAMPLE, "--rounds", "2", "--tensors", tensors], env=env)
    assert code == 0, out
    assert out.count("round 2/2") == 3 and out.count("verified") >= 6, out


@pytest.mark.parametrize("transport", ["default", "ucx"])
def test_deterministic_mode_is_bit_identical_across_runs(transport):
    command = [EXAMPLE, "--rounds", "5", "--quiet", "--values", "random", "--tensors", "fp32:100000,fp16:50000,bf16:70000"]
    env = transport_env(transport)
    runs = []
    for _ in range(2):
        code, out = run_pslaunch(3, 2, command,
                                 env={**env, "SYNCLINE_DETERMINISTIC": 1, "SYNCLINE_PARTITION_BYTES": 16384})
        assert code == 0, out
        found = digests(out)
        assert len(found) == 3 and len(set(found)) == 1, out
        runs.append(found[0])
    assert runs[0] == runs[1]


@pytest.mark.parametrize("transport", ["default", "ucx"])
def test_deterministic_sums_do_not_depend_on_the_scheduling_proxy(transport):
    """Every chunk at once (no scheduler), one chunk of credit, and BytePS's credit setting: the
    same bits (deterministic mode), so the proxy changes when chunks go, never what they sum to."""
    command = [EXAMPLE, "--rounds", "4", "--quiet", "--values", "random", "--tensors", "fp32:100000,fp16:50000,bf16:7"]
    base = {**transport_env(transport), "SYNCLINE_DETERMINISTIC": 1, "SYNCLINE_PARTITION_BYTES": 16384}
    variants = [{"SYNCLINE_SCHEDULING": "fifo", "SYNCLINE_SCHEDULING_CREDIT": 0},
                {"SYNCLINE_SCHEDULING": "priority", "SYNCLINE_SCHEDULING_CREDIT": 16384},
                {"BYTEPS_SCHEDULING_CREDIT": 2}]
    results = []
    for variant in variants:
        code, out = run_pslaunch(3, 2, command, env={**base, **variant})
        assert code == 0, out
        found = digests(out)
        assert len(found) == 3 and len(set(found)) == 1, out
        results.append(found[0])
    assert len(set(results)) == 1, list(zip(variants, results))


@pytest.mark.parametrize("transport", ["default", "ucx"])
def test_async_mode_applies_every_push(transport):
    env = transport_env(transport)
    code, out = run_pslaunch(3, 2, [EXAMPLE, "--rounds", "30", "--quiet", "--tensors", "fp32:5000,fp64:70000"],
                             env={**env, "SYNCLINE_ASYNC": 1, "SYNCLINE_PARTITION_BYTES": 8192})
    assert code == 0, out
    assert out.count("async totals verified") == 3, out


@pytest.mark.parametrize("transport", ["default", "DMLC_ENABLE_RDMA", "DMLC_ENABLE_UCX"])
def test_bytesps_environment_names_work(transport):
    # The BytePS/ps-lite names configure the same settings; DMLC_ENABLE_RDMA/UCX pick the ucx transport.
    env = {"BYTEPS_PARTITION_BYTES": 4096, "PS_HEARTBEAT_INTERVAL": 1}
    if transport != "default":
        env[transport] = 1
    code, out = run_pslaunch(2, 1, [EXAMPLE, "--rounds", "3", "--tensors", "fp32:100000"], env=env)
    assert code == 0, out
    assert out.count("done: 3 rounds") == 2, out
    expected = "tcp://" if transport == "default" else "ucx://"
    assert f"server listening at {expected}" in out, out



def test_a_worker_that_is_sent_sigterm_stops_at_once():
    """A node program that registers no signal callback (the example worker) exits on SIGTERM as
    the default action would, here while it waits to join: it used to ignore the signal, so a
    launcher stopping a multi-host job waited out its grace period and killed it."""
    import signal
    import subprocess
    import time

    from conftest import clean_env, free_port
    env = clean_env(SYNCLINE_ROLE="worker", SYNCLINE_SCHEDULER_PORT=free_port(), SYNCLINE_JOB_TOKEN="t",
                    SYNCLINE_STARTUP_TIMEOUT_MS=120000)
    proc = subprocess.Popen([EXAMPLE, "--rounds", "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        time.sleep(1)  # well into its wait for the (absent) scheduler
        assert proc.poll() is None, proc.communicate()[0]
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=30)[0]  # the startup timeout is 120 s
        assert proc.returncode == 128 + signal.SIGTERM, output
        assert "stopped by signal 15" in output, output
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
