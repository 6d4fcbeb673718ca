"""Helpers for the multi-process integration tests: real syncline binaries on 127.0.0.1.

The build directory comes from SYNCLINE_BUILD_DIR (ctest sets it); every process
started here is killed when its test ends, and every wait has a timeout.
"""
import os
import signal
from localhost import clean_env, free_port  # noqa: F401 (the tests import them from here)
import subprocess
import time
from pathlib import Path

import pytest

BUILD_DIR = Path(os.environ.get("SYNCLINE_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
BIN = BUILD_DIR / "bin"
PSLAUNCH = str(BIN / "pslaunch")
SCHEDULER = str(BIN / "syncline-scheduler")
SERVER = str(BIN / "syncline-server")
EXAMPLE = str(BIN / "syncline-example-training")




# The UCX transport, with UCX_TLS as given (None: UCX's default, or the caller's UCX_TLS).
UCX_VARIANTS = {"ucx": None, "ucx-tcp": "tcp", "ucx-sm": "sm"}


def transport_env(transport):
    """Settings for a transport name of these tests: default (Syncline's defaults), tcp, ipc, shm
    (payloads through Syncline's shared memory, headers over tcp) or a UCX variant; all but default
    and shm keep payloads on the transport."""
    if transport == "default":
        return {}
    if transport == "shm":
        return {"SYNCLINE_TRANSPORT": "tcp", "SYNCLINE_SHM": 1}
    if transport in UCX_VARIANTS:
        tls = UCX_VARIANTS[transport]
        return {"SYNCLINE_TRANSPORT": "ucx", "SYNCLINE_SHM": 0, **({"UCX_TLS": tls} if tls else {})}
    return {"SYNCLINE_TRANSPORT": transport, "SYNCLINE_SHM": 0}


def run_pslaunch(workers, servers, command, env=None, timeout=300, launcher_args=()):
    """Runs a local job through pslaunch; returns (exit code, combined output)."""
    args = [PSLAUNCH, "--workers", str(workers), "--servers", str(servers), *launcher_args, "--", *command]
    proc = subprocess.run(args, env=clean_env(**(env or {})), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)
    return proc.returncode, proc.stdout


class Cluster:
    """A job whose processes the test starts one by one (to kill some, or to
    aim garbage at their ports)."""

    def __init__(self, workers, servers, tmp_path, **settings):
        self.port = free_port()
        self.tmp_path = tmp_path
        self.base = dict(SYNCLINE_NUM_WORKERS=workers, SYNCLINE_NUM_SERVERS=servers,
                         SYNCLINE_SCHEDULER_HOST="127.0.0.1", SYNCLINE_SCHEDULER_PORT=self.port,
                         SYNCLINE_JOB_TOKEN="integration", **settings)
        self.procs = {}

    def start(self, name, argv, **env):
        log = open(self.tmp_path / f"{name.replace(' ', '_')}.log", "w+")
        proc = subprocess.Popen(argv, env=clean_env(**self.base, **env), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs[name] = (proc, log)
        return proc

    def start_scheduler(self, **env):
        return self.start("scheduler", [SCHEDULER], SYNCLINE_ROLE="scheduler", **env)

    def start_server(self, i, **env):
        return self.start(f"server {i}", [SERVER], SYNCLINE_ROLE="server", **env)

    def start_worker(self, rank, args, **env):
        return self.start(f"worker {rank}", [EXAMPLE, *args], SYNCLINE_ROLE="worker", SYNCLINE_WORKER_RANK=rank,
                          **env)

    def output(self, name):
        proc, log = self.procs[name]
        log.flush()
        return (self.tmp_path / f"{name.replace(' ', '_')}.log").read_text()

    def wait_all(self, timeout, skip=()):
        """Waits for every process but those named in `skip` (a frozen one, say); returns
        {name: exit code} (None if still running at the deadline)."""
        deadline = time.monotonic() + timeout
        codes = {}
        for name, (proc, _) in self.procs.items():
            if name in skip:
                continue
            try:
                codes[name] = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                codes[name] = None
        return codes

    def wait_for_output(self, name, text, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output(name):
                return True
            time.sleep(0.05)
        return False

    def kill_all(self):
        for proc, log in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=10)
            log.close()


@pytest.fixture
def cluster_factory(tmp_path):
    made = []

    def make(workers, servers, **settings):
        c = Cluster(workers, servers, tmp_path, **settings)
        made.append(c)
        return c

    yield make
    for c in made:
        c.kill_all()


def pytest_configure(config):
    for binary in (PSLAUNCH, SCHEDULER, SERVER, EXAMPLE):
        if not os.access(binary, os.X_OK):
            raise pytest.UsageError(f"{binary} is missing: build first (cmake --build build), or set SYNCLINE_BUILD_DIR")
