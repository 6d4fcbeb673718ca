"""Kill and freeze: 20 seeded trials of kill_harness (a 1+2+3 job, one random process SIGKILLed
or SIGSTOPped at a random moment, under pslaunch or started one by one). Each trial must end with
no survivor running (0 hangs), no survivor exiting 0 before its work was complete, and the victim
named by the errors. bench/kill/run.py runs the same trials by the hundred.

A failing trial prints its seed; replay it with `bench/kill/run.py --seeds SEED --keep DIR`.
SYNCLINE_KILL_SEED moves the first seed (default 1000) to try other plans.
"""
import os
import signal
import time

import pytest

import kill_harness as kh
from conftest import BIN, Cluster

TRIALS = 20
FIRST_SEED = int(os.environ.get("SYNCLINE_KILL_SEED", "1000"))


def tail(text, n=1500):
    return text[-n:]


# Consecutive seeds: 5 trials for each launcher and signal; victim and moment drawn from the seed.
@pytest.mark.parametrize("seed", range(FIRST_SEED, FIRST_SEED + TRIALS))
def test_kill_or_freeze_a_random_node(tmp_path, seed):
    plan = kh.plan_trial(seed)
    result = kh.run_trial(plan, BIN, tmp_path)
    seconds = {n: None if t is None else round(t, 2) for n, t in result.exit_s.items()}
    print(f"{plan.describe()}: {result.phase}; seconds to exit {seconds}; exit codes {result.codes}")
    bad = kh.problems(result)
    assert not bad, (plan.describe(), result.phase, bad,
                     {n: tail(t) for n, t in result.output.items() if n != plan.victim})


@pytest.fixture(scope="module")
def unregistered_victim(tmp_path_factory):
    """A worker frozen before it registers (SIGSTOP microseconds after its fork), the rest of the
    job started normally. Returns ({name: exit code}, seconds to exit, {name: output})."""
    c = Cluster(kh.WORKERS, kh.SERVERS, tmp_path_factory.mktemp("unregistered"), **kh.SETTINGS)
    frozen = f"worker {kh.WORKERS - 1}"
    try:
        c.start_scheduler()
        for i in range(kh.SERVERS):
            c.start_server(i, SYNCLINE_SERVER_RANK=i)
        os.killpg(c.start_worker(kh.WORKERS - 1, ["--rounds", "10"]).pid, signal.SIGSTOP)
        for rank in range(kh.WORKERS - 1):
            c.start_worker(rank, ["--rounds", "10"])
        start = time.monotonic()
        deadline = start + kh.STARTUP_TIMEOUT_MS / 1000 + 10
        codes = {}
        for name, (proc, _) in c.procs.items():
            if name != frozen:
                try:
                    codes[name] = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except Exception:  # subprocess.TimeoutExpired: reported as hung below
                    codes[name] = None
        return codes, time.monotonic() - start, {name: c.output(name) for name in codes}
    finally:
        c.kill_all()


def test_unregistered_victim_ends_the_job_within_the_startup_timeout(unregistered_victim):
    codes, seconds, _ = unregistered_victim
    assert all(code not in (0, None) for code in codes.values()), codes
    assert seconds < kh.STARTUP_TIMEOUT_MS / 1000 + 5, seconds


def test_unregistered_victim_is_named(unregistered_victim):
    _, _, outputs = unregistered_victim
    for name, text in outputs.items():
        assert kh.error_names(text, [f"worker {kh.WORKERS - 1}"]), (name, tail(text))
