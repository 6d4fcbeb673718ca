"""The platforms bench/torch/run.py runs its configurations on: this host (Loopback) and the
emulated cluster (Cluster), and how one configuration becomes processes there: the step
script's arguments, the settings of a Syncline variant, the results each worker prints."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "cluster"))
from benchenv import clean_env, json_lines  # noqa: E402

PSLAUNCH = str(Path(sys.executable).parent / "pslaunch")
# The defaults as a user gets them, but untuned: the online tuner spends its
# first few dozen steps searching, more than a benchmark run takes here.
SYNCLINE_ENV = {"SYNCLINE_AUTOTUNE": "0", "SYNCLINE_LOG_LEVEL": "warn"}


def log(*args):
    print(*args, flush=True)


def step_args(a, model, mode, config=""):
    curve = ["--task", "learnable", "--curve", "--lr", str(a.lr)] if a.curve else []
    hook = ["--ddp-hook", config.split()[1]] if mode == "ddp" and " " in config else []
    return [sys.executable, a.fw.step, "--model", model, "--mode", mode, "--batch", str(a.batch), "--steps",
            str(a.steps), "--warmup", str(a.warmup), "--compute-ms", str(a.compute_ms), "--straggler", a.straggler,
            *curve, *hook]


def is_baseline(config, a):
    """The framework's own data parallelism, with or without a communication hook ("DDP bf16")."""
    return config.split()[0] == a.fw.baseline


def with_hooks(configs, a):
    """The baseline once more per --ddp-hooks hook."""
    out = []
    for c in configs:
        out += [c] + ([f"{c} {hook}" for hook in a.ddp_hooks] if c == a.fw.baseline else [])
    return tuple(out)


def results(output, workers, what):
    rows = [r for r in json_lines(output) if "step_ms" in r]
    if len(rows) != workers:
        raise RuntimeError(f"{what}: expected {workers} results, got {len(rows)}:\n{output[-3000:]}")
    return rows


def with_variants(configs, a):
    """Each Syncline configuration once per --variant (a label and its settings)."""
    out = []
    for c in configs:
        out += [c] if not c.startswith("Syncline") else [c + (f" ({label})" if label else "") for label in a.variants]
    return tuple(out)


def variant_env(config, a):
    label = config[config.index("(") + 1:-1] if config.endswith(")") else ""
    return dict(SYNCLINE_ENV, **a.variants[label])


class Loopback:
    name = "loopback"

    def __init__(self, a):
        self.a = a
        self.configs = with_hooks(with_variants(("compute-only", a.fw.baseline, "Syncline"), a), a)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def _run_all(self, argvs, envs, what):
        procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for argv, env in zip(argvs, envs)]
        out = ""
        for p in procs:
            try:
                out += p.communicate(timeout=self.a.job_timeout)[0]
            finally:
                p.kill()
            if p.returncode != 0:
                raise RuntimeError(f"{what} failed ({p.returncode}):\n{out[-3000:]}")
        return out

    def run(self, config, model):
        a, n = self.a, self.a.workers
        if config == "compute-only":
            out = self._run_all([step_args(a, model, "compute") + ["--as-worker", f"{r}/{n}"] for r in range(n)],
                                [clean_env()] * n, config)
        elif is_baseline(config, a):
            port = free_port()  # TensorFlow's workers take the ones after it too
            envs = [clean_env(a.fw.baseline_env(r, n, ["127.0.0.1"] * n, port)) for r in range(n)]
            out = self._run_all([step_args(a, model, a.fw.baseline_mode, config)] * n, envs, config)
        else:
            env = variant_env(config, a)
            # Not a setting of Syncline's processes: pslaunch's split of the workers into hosts.
            hosts = env.pop("EMULATED_HOSTS", "1")
            argv = [PSLAUNCH, "--workers", str(n), "--servers", str(a.servers), "--timeout", str(a.job_timeout),
                    "--emulated-hosts", hosts, "--", *step_args(a, model, "syncline")]
            out = self._run_all([argv], [clean_env(env)], config)
        self.last_output = out
        return results(out, n, config)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    name = "emulated cluster"

    def __init__(self, a):
        import jobs
        import netcluster
        self.jobs, self.netcluster, self.a = jobs, netcluster, a
        self.configs = with_hooks(
            with_variants(("compute-only", a.fw.baseline, "Syncline, server hosts", "Syncline, colocated"), a), a)
        # As many server hosts as worker hosts (4 and 4 by default), L workers on each worker host.
        hosts, per_host = a.workers // a.workers_per_host, a.workers_per_host
        self.separate = jobs.Layout(a.workers, hosts, per_host=per_host)
        self.colocated = jobs.Layout(a.workers, hosts, colocate=True, per_host=per_host)

    def __enter__(self):
        kwargs = {} if self.a.queue_ms is None else {"queue_ms": self.a.queue_ms}
        self.c = self.netcluster.EmulatedCluster(self.separate.hosts, rate=self.a.rate, timeout=self.a.timeout, **kwargs)
        self.c.__enter__()
        log(f"emulated cluster: {self.separate.hosts} hosts, links {self.netcluster.format_rate(self.c.rate)} "
            f"each way; {self.a.workers} workers, {self.separate.per_host} on each of {self.separate.worker_hosts} "
            f"worker hosts")
        return self

    def __exit__(self, *exc):
        return self.c.__exit__(*exc)

    def _shaper_counters(self, pattern):
        """A counter of the links' shapers (a regular expression of `tc -s qdisc` with one number),
        summed per (host, "up" | "down")."""
        import re
        out = {}
        for i in range(self.c.hosts):
            for way, ns, dev in (("up", self.c.namespace(i), self.c.host_link(i)),
                                 ("down", self.c.bridge_ns, self.c.bridge_port(i))):
                text = subprocess.run(["tc", "-n", ns, "-s", "qdisc", "show", "dev", dev], capture_output=True,
                                      text=True).stdout
                out[(i, way)] = sum(int(d) for d in re.findall(pattern, text))
        return out

    def drops(self):
        """Packets the links' shapers have dropped so far, per (host, "up" | "down"): the trace of
        more bytes in flight into a link than its shallow queue holds; and the bytes they sent."""
        return {"dropped": self._shaper_counters(r"dropped (\d+)"), "sent": self._shaper_counters(r"Sent (\d+) bytes")}

    def drop_report(self, config, before_both, after_both, steps):
        """Drops per step in all, and by link: into and out of the worker hosts, and of the server
        hosts where the servers have hosts of their own; and the bytes out of each worker host per step."""
        before, after = before_both["dropped"], after_both["dropped"]
        layout = self.layout(config)
        workers = {layout.worker_host(r) for r in range(self.a.workers)}
        servers = {layout.server_host(j) for j in range(layout.servers)} - workers
        def per_step(hosts, way):
            return sum(after[k] - before[k] for k in after if k[0] in hosts and k[1] == way) / steps
        text = f"{sum(after[k] - before[k] for k in after) / steps:8.0f} packets dropped by the links per step " \
               f"(into workers {per_step(workers, 'down'):.0f}, out of workers {per_step(workers, 'up'):.0f}"
        if servers:
            text += f", into servers {per_step(servers, 'down'):.0f}, out of servers {per_step(servers, 'up'):.0f}"
        sent_up = sum(after_both["sent"][k] - before_both["sent"][k] for k in after if k[0] in workers and k[1] == "up")
        return text + f"); {sent_up / len(workers) / steps / 2**20:.1f} MiB out of each worker host per step"

    def layout(self, config):
        """Where `config` runs: the frameworks' own jobs and colocated Syncline on the worker hosts
        alone, Syncline otherwise with server hosts of its own."""
        return self.colocated if config == "compute-only" or is_baseline(config, self.a) or "colocated" in config \
            else self.separate

    def _wait(self, procs, what):
        codes = self.c.wait(procs, timeout=self.a.job_timeout)
        if any(code != 0 for code in codes):
            for q in procs:
                if q.popen.poll() is None:
                    self.c.kill(q, grace=2.0)
            # Every failed process: the first to fail is not always the first listed.
            raise RuntimeError(f"{what}: " + "\n".join(f"{p.name} exit {code}\n{p.output()[-1500:]}"
                                                        for p, code in zip(procs, codes) if code != 0))
        return "".join(p.output() for p in procs)

    def run(self, config, model):
        a, n = self.a, self.a.workers
        hosts = [self.layout(config).worker_host(r) for r in range(n)]
        if config == "compute-only":
            procs = [self.c.start(h, step_args(a, model, "compute") + ["--as-worker", f"{r}/{n}"], clean_env(),
                                  name=f"compute-{r}")
                     for r, h in enumerate(hosts)]
            self.last_output = self._wait(procs, config)
            return results(self.last_output, n, config)
        if is_baseline(config, a):
            addresses = [self.c.address(h) for h in hosts]
            procs = [self.c.start(h, step_args(a, model, a.fw.baseline_mode, config),
                                  clean_env(a.fw.baseline_env(r, n, addresses, 29500, self.c.host_link(h))),
                                  name=f"{a.fw.baseline_mode}-{r}")
                     for r, h in enumerate(hosts)]
            self.last_output = self._wait(procs, config)
            return results(self.last_output, n, config)
        job = self.jobs.start_job(self.c, self.layout(config), step_args(a, model, "syncline"),
                                  dict(variant_env(config, a), PATH=os.environ["PATH"]), timeout=a.job_timeout)
        codes = job.wait(a.job_timeout + 10)
        if any(code != 0 for code in codes):
            raise RuntimeError(f"{config}: " + "; ".join(
                f"{p.name}: exit {code}\n{p.output()[-2000:]}" for p, code in zip(job.procs, codes) if code != 0))
        self.last_output = "".join(f"--- {p.name}\n{p.output()}" for p in job.procs)
        return results("".join(p.output() for p in job.workers), n, config)  # a JSON line per worker
