"""A Syncline job across the hosts of an EmulatedCluster: one `pslaunch --role ...`
per process, each advertising its host's address, all pointed at the scheduler's.

Layouts (host 0 is always the scheduler's), with H worker hosts of L workers each (N = H * L;
L = 1 unless per_host says otherwise):
  separate:  servers on hosts 1..M, worker hosts M+1..M+H       (1 + M + H hosts)
  colocate:  worker hosts 1..H, server j on worker host j        (1 + H hosts, M <= H)
Worker r is on worker host r // L, local rank r % L. A host of several workers runs one
`pslaunch --role worker --local-workers L --node-rank h`, which starts them.
"""
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from benchenv import clean_env, json_lines  # noqa: E402,F401  (clean_env: also for jobs' users)
SCHEDULER_PORT = 9000


def build_dir():
    return Path(os.environ.get("SYNCLINE_BUILD_DIR", REPO / "build"))


def binary(name):
    path = build_dir() / "bin" / name
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"{path} is missing: build first (cmake --build build), or set SYNCLINE_BUILD_DIR")
    return str(path)


@dataclass
class Layout:
    workers: int
    servers: int
    colocate: bool = False
    per_host: int = 1  # workers on each worker host

    def __post_init__(self):
        if self.per_host < 1 or self.workers % self.per_host:
            raise ValueError(f"{self.workers} workers do not split into hosts of {self.per_host}")
        if self.colocate and self.servers > self.worker_hosts:
            raise ValueError("colocated servers need a worker host each (servers <= worker hosts)")

    @property
    def worker_hosts(self):
        return self.workers // self.per_host

    @property
    def hosts(self):
        return 1 + self.worker_hosts + (0 if self.colocate else self.servers)

    def server_host(self, j):
        return 1 + j

    def worker_host(self, r):
        return 1 + r // self.per_host + (0 if self.colocate else self.servers)


@dataclass
class Job:
    cluster: object
    layout: Layout
    scheduler: object = None
    servers: list = field(default_factory=list)
    workers: list = field(default_factory=list)  # one pslaunch per worker host (each of its workers)

    @property
    def procs(self):
        return [self.scheduler, *self.servers, *self.workers]

    def wait(self, timeout, after_failure=10.0):
        """Exit codes of every pslaunch. Once one fails, the others get `after_failure`
        seconds to end (they learn of it from the scheduler), then are stopped; so are
        those still running at `timeout`, whose code is None."""
        end = time.monotonic() + min(timeout, self.cluster.remaining())
        while time.monotonic() < end:
            codes = [p.popen.poll() for p in self.procs]
            if None not in codes:
                return codes
            if any(c not in (None, 0) for c in codes):
                end = min(end, time.monotonic() + after_failure)
            time.sleep(0.05)
        codes = [p.popen.poll() for p in self.procs]
        for p, c in zip(self.procs, codes):
            if c is None:
                self.cluster.kill(p, grace=2.0)
        return codes


def start_job(cluster, layout, worker_command, env=None, timeout=240):
    """Starts scheduler, servers and workers, each with `pslaunch --role` in its host."""
    pslaunch = binary("pslaunch")
    token = os.urandom(16).hex()
    scheduler = f"{cluster.address(0)}:{SCHEDULER_PORT}"
    common = ["--scheduler", scheduler, "--workers", layout.workers, "--servers", layout.servers,
              "--token", token, "--timeout", int(timeout)]
    env = clean_env(env)
    job = Job(cluster, layout)
    job.scheduler = cluster.start(0, [pslaunch, "--role", "scheduler", *common], env, name="scheduler")
    for j in range(layout.servers):
        h = layout.server_host(j)
        job.servers.append(cluster.start(h, [pslaunch, "--role", "server", *common, "--host", cluster.address(h)],
                                         env, name=f"server-{j}"))
    for node in range(layout.worker_hosts):
        first = node * layout.per_host
        h = layout.worker_host(first)
        place = ["--rank", first] if layout.per_host == 1 else \
            ["--local-workers", layout.per_host, "--node-rank", node]
        name = f"worker-{first}" if layout.per_host == 1 else f"workers-{first}-{first + layout.per_host - 1}"
        job.workers.append(cluster.start(h, [pslaunch, "--role", "worker", *common, "--host", cluster.address(h),
                                             *place, "--", *worker_command], env, name=name))
    return job


def describe(job):
    """Where each process ran, for the reader."""
    c, lay = job.cluster, job.layout
    rows = [f"scheduler  host 0 ({c.address(0)}:{SCHEDULER_PORT})"]
    rows += [f"server {j}   host {lay.server_host(j)} ({c.address(lay.server_host(j))})" for j in range(lay.servers)]
    rows += [f"worker {r}   host {lay.worker_host(r)} ({c.address(lay.worker_host(r))})" for r in range(lay.workers)]
    return rows


def worker_lines(job, rank):
    """What worker `rank` printed: pslaunch prefixes each line with "[worker R] ", also where
    one pslaunch runs several workers of a host."""
    prefix = f"[worker {rank}] "
    return [line[len(prefix):] for p in job.workers for line in p.output().splitlines() if line.startswith(prefix)]


def check_training(job, codes, rounds):
    """Problems with a finished syncline-example-training job (empty: every worker
    verified every sum of `rounds` rounds and all pulled bit-identical results)."""
    problems = []
    names = ["scheduler"] + [f"server {j}" for j in range(len(job.servers))] + [p.name for p in job.workers]
    for name, code in zip(names, codes):
        if code != 0:
            problems.append(f"{name}: {'still running at the deadline or after another failed (stopped)' if code is None else f'exit status {code}'}")
    digests = []
    for r in range(job.layout.workers):
        out = "\n".join(worker_lines(job, r))
        if out.count(f"done: {rounds} rounds") != 1:
            problems.append(f"worker {r} did not print 'done: {rounds} rounds'")
        digests += re.findall(r"result digest ([0-9a-f]{16})", out)
    if len(digests) != job.layout.workers or len(set(digests)) != 1:
        problems.append(f"result digests differ or are missing: {digests}")
    return problems


def goodput_lines(output):
    """The JSON lines that syncline-bench-worker printed (pslaunch prefixes them)."""
    return [f for f in json_lines(output) if "goodput_MBps" in f]
