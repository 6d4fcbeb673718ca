"""Kill-and-freeze harness: one trial = one 1-scheduler, 2-server, 3-worker job of
syncline-example-training in which one random process gets SIGKILL or SIGSTOP at a random
moment. Shared by tests/integration/test_kill_harness.py (a few seeded trials in CI) and
bench/kill/run.py (100 trials and a summary); it needs nothing but the standard library.

Contract of a trial (`run_trial(plan_trial(seed), ...)`):
- Everything random comes from random.Random(seed): the same seed replays the same plan
  (launcher, victim, signal, moment, start gaps); only the machine's timing differs.
- Every other process must exit within DEADLINE_S of the signal; one still running then is
  a hang. Everything the trial started is SIGKILLed (process groups) before it returns.
- `problems(result)` lists what the trial got wrong: a hang; a survivor that exited 0 although
  its work was not complete (a worker that printed no "done:", a scheduler, server or pslaunch
  while some worker did not); an error that does not name the victim.
"""
import os
import random
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from localhost import clean_env, free_port

WORKERS, SERVERS = 3, 2
ROUNDS = 1000  # ~1-2 s of training on the 2-core VM: long enough to be hit while it runs
TENSORS = "fp32:50000,fp16:3000"
HEARTBEAT_TIMEOUT_MS = 1500
STARTUP_TIMEOUT_MS = 5000  # registration takes ~20 ms here; a node that never joins costs this
SETTINGS = dict(SYNCLINE_HEARTBEAT_INTERVAL_MS=100, SYNCLINE_HEARTBEAT_TIMEOUT_MS=HEARTBEAT_TIMEOUT_MS,
                SYNCLINE_STARTUP_TIMEOUT_MS=STARTUP_TIMEOUT_MS)
# Startup timeout (a victim that never registered), then pslaunch's 5 s grace for a frozen
# victim that ignores SIGTERM, then slack for a loaded machine. Past this, a survivor is hung.
DEADLINE_S = STARTUP_TIMEOUT_MS / 1000 + 5 + 10
LAUNCHERS = ["pslaunch", "one-by-one"]
SIGNALS = ["SIGKILL", "SIGSTOP"]
NAMES = ["scheduler"] + [f"server {i}" for i in range(SERVERS)] + [f"worker {r}" for r in range(WORKERS)]




def role_of(name):  # "worker 1" -> "worker"
    return name.split()[0]


@dataclass
class Plan:
    seed: int
    launcher: str        # "pslaunch" or "one-by-one"
    victim: str          # one of NAMES
    sig: str             # "SIGKILL" or "SIGSTOP"
    moment: str          # "startup": delay_s after the launch; "training" or "end": when a worker reports at_round
    delay_s: float       # startup only
    at_round: int        # training (anywhere in the run) and end (the last rounds, or just after)
    start_gaps: list     # one-by-one: seconds between consecutive starts (NAMES order)

    def describe(self):
        when = f"{self.delay_s:.3f} s after the launch" if self.moment == "startup" else f"round {self.at_round}"
        return f"seed {self.seed}: {self.launcher}, {self.sig} {self.victim} at {when}"


def plan_trial(seed):
    """The trial of `seed`. Launcher and signal cycle with the seed, so any 4 consecutive seeds
    cover the four pairs; the rest comes from random.Random(seed)."""
    rng = random.Random(seed)
    plan = Plan(seed=seed, launcher=LAUNCHERS[seed % 2], victim=rng.choice(NAMES), sig=SIGNALS[(seed // 2) % 2],
                moment=rng.choices(["startup", "training", "end"], [1, 3, 1])[0],
                delay_s=0.0, at_round=0, start_gaps=[rng.uniform(0, 0.08) for _ in NAMES])
    # Moments in rounds, not seconds, so that a slow or busy machine still hits the phase planned.
    if plan.moment == "startup":
        plan.delay_s = rng.uniform(0, 0.25)   # pslaunch registers in ~20 ms; one-by-one starts take ~0.2 s
    elif plan.moment == "training":
        plan.at_round = rng.randint(1, ROUNDS - 50)
    else:
        plan.at_round = ROUNDS - rng.randint(0, 30)
    return plan


class Log:
    """A process's output file, read incrementally (the trial polls it often)."""

    def __init__(self, path):
        self.path, self.offset, self.text = Path(path), 0, ""

    def read(self):
        if self.path.exists():
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
            self.offset += len(chunk)
            self.text += chunk.decode(errors="replace")
        return self.text


def _proc_stat(pid):
    """(state letter, start time in clock ticks) of a pid, or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[19])


class Proc:
    """One process of the job: a child of ours (Popen) or of pslaunch (a pid we may only watch)."""

    def __init__(self, popen=None, pid=None):
        self.popen = popen
        self.pid = popen.pid if popen else pid
        self.stat = None if popen else _proc_stat(pid)
        self.code = None  # exit code, when known (our own children only)

    def alive(self):
        if self.popen:
            self.code = self.popen.poll()
            return self.code is None
        # A zombie has exited; a different start time means the pid was reused.
        now = _proc_stat(self.pid)
        return now is not None and self.stat is not None and now[0] != "Z" and now[1] == self.stat[1]

    def signal_group(self, sig):
        try:
            os.killpg(self.pid, sig)  # every process here leads its own group
        except (ProcessLookupError, PermissionError):
            pass


def pslaunch_children(pid):
    """{name: pid} of pslaunch's children, named from the environment pslaunch gave them."""
    out = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                env = dict(kv.split("=", 1) for kv in Path(f"/proc/{child}/environ").read_text().split("\0") if "=" in kv)
            except OSError:
                continue
            role = env.get("SYNCLINE_ROLE")
            if role is None:
                continue  # forked, not exec'd yet: still pslaunch's environment
            rank = env.get("SYNCLINE_WORKER_RANK" if role == "worker" else "SYNCLINE_SERVER_RANK", "")
            out[role if role == "scheduler" else f"{role} {rank}"] = int(child)
    return out


@dataclass
class Result:
    plan: Plan
    phase: str = ""                     # at the signal: registering, training, finished, victim gone
    published: bool = False             # the scheduler sent the address book (every node registered)
    exit_s: dict = field(default_factory=dict)   # survivor (and "pslaunch") -> seconds to exit, None if hung
    codes: dict = field(default_factory=dict)    # exit codes known: our children, or pslaunch's
    named: dict = field(default_factory=dict)    # survivor (or "job" under pslaunch) -> names the victim
    output: dict = field(default_factory=dict)   # name -> its output
    # pslaunch waits for a worker frozen after the job finished (every other process exited 0):
    # a launcher cannot tell that from a script still at work after shutdown (saving, evaluating).
    waits_for_frozen_worker: bool = False

    @property
    def hung(self):
        return [n for n, t in self.exit_s.items() if t is None]


def _naming_patterns(victim, ports):
    """Regular expressions, one of which an error line must match to name the victim (from the
    real messages): the scheduler's Describe ("worker 1 (node 4 at ...)"), a server's address, a
    client's "scheduler at ADDRESS", or pslaunch's verdict on the victim itself (killed, or a
    service frozen after the job finished: "server 0 still running 5 s after the workers finished")."""
    launcher = rf"pslaunch: {victim} (killed by signal|still running .* after the workers finished)"
    if victim == "scheduler":
        return [rf"scheduler at (tcp://)?127\.0\.0\.1:{ports['scheduler']}\b", launcher]
    # ... or the scheduler's startup abort listing who never registered.
    out = [re.escape(f"{victim} (node"), rf"never registered: (.*, )?{re.escape(victim)}\b", launcher]
    if victim in ports:
        out.append(rf"127\.0\.0\.1:{ports[victim]}\b")
    return out


def error_names(text, patterns):
    """Whether a line reporting a failure matches a pattern (only those: an address printed at startup is no name)."""
    lines = [ln for ln in text.splitlines() if "[error]" in ln or "[warn" in ln or ln.startswith("pslaunch:")]
    return any(re.search(p, line) for line in lines for p in patterns)


class PslaunchLog(Log):
    """pslaunch's merged output, split as it grows into each process's lines (by their
    "[worker 1] " prefix); pslaunch's own notices go to "pslaunch"."""

    def __init__(self, path):
        super().__init__(path)
        self.parsed, self.by_name = 0, {name: "" for name in NAMES + ["pslaunch"]}

    def of(self, name):
        text = self.read()
        end = text.rfind("\n") + 1  # whole lines only
        for line in text[self.parsed:end].splitlines():
            m = re.match(r"\[(scheduler|server \d+|worker \d+)\] ", line)
            self.by_name[m.group(1) if m else "pslaunch"] += (line[m.end():] if m else line) + "\n"
        self.parsed = end
        return self.by_name.get(name, "")


def run_trial(plan, bin_dir, work_dir, settings=None, poll_s=0.01):
    """Runs `plan`; returns a Result. `work_dir` receives the processes' output files; `settings`
    (SYNCLINE_* names) go to every process, e.g. another transport."""
    bin_dir, work_dir = Path(bin_dir), Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    ports = {"scheduler": free_port()}
    procs, logs, files = {}, {}, []
    base = dict(SYNCLINE_NUM_WORKERS=WORKERS, SYNCLINE_NUM_SERVERS=SERVERS, **SETTINGS, **(settings or {}))
    worker_argv = [str(bin_dir / "syncline-example-training"), "--rounds", str(ROUNDS), "--tensors", TENSORS]
    result = Result(plan)

    def spawn(argv, path, env):
        f = open(path, "w")
        files.append(f)
        return subprocess.Popen(argv, env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)

    def start_one(name):
        role = role_of(name)
        env = dict(base, SYNCLINE_ROLE=role, SYNCLINE_SCHEDULER_HOST="127.0.0.1",
                   SYNCLINE_SCHEDULER_PORT=ports["scheduler"], SYNCLINE_JOB_TOKEN="kill-harness")
        argv = [str(bin_dir / f"syncline-{role}")]
        if role == "server":
            ports[name] = free_port()
            env.update(SYNCLINE_PORT=ports[name], SYNCLINE_SERVER_RANK=name.split()[1])
        elif role == "worker":
            env.update(SYNCLINE_WORKER_RANK=name.split()[1])
            argv = worker_argv
        path = work_dir / f"{name.replace(' ', '_')}.log"
        procs[name] = Proc(popen=spawn(argv, path, clean_env(**env)))
        logs[name] = Log(path)

    def text(name):
        if plan.launcher == "pslaunch":
            return logs["pslaunch"].of(name)
        return logs[name].read() if name in logs else ""

    try:
        pending = []  # one-by-one: (start time, name) still to start
        if plan.launcher == "pslaunch":
            argv = [str(bin_dir / "pslaunch"), "--workers", str(WORKERS), "--servers", str(SERVERS),
                    "--port", str(ports["scheduler"]), "--", *worker_argv]
            path = work_dir / "pslaunch.log"
            procs["pslaunch"] = Proc(popen=spawn(argv, path, clean_env(**base)))
            logs["pslaunch"] = PslaunchLog(path)
            until = time.monotonic() + 10
            while time.monotonic() < until and len(children := pslaunch_children(procs["pslaunch"].pid)) < len(NAMES):
                time.sleep(0.002)
            for name, pid in children.items():
                procs[name] = Proc(pid=pid)
        else:
            t = time.monotonic()
            for name, gap in zip(NAMES, plan.start_gaps):
                t += gap
                pending.append((t, name))

        def start_due():
            while pending and pending[0][0] <= time.monotonic():
                start_one(pending.pop(0)[1])

        def wait_until(ready, limit_s):
            # Keeps starting one-by-one processes while it waits; bounded by limit_s.
            until = time.monotonic() + limit_s
            while time.monotonic() < until:
                start_due()
                if ready():
                    return True
                time.sleep(poll_s)
            return False

        workers = [f"worker {r}" for r in range(WORKERS)]
        if plan.moment == "startup":
            wait_until(lambda: False, plan.delay_s)
        else:  # bounded: a job that stopped early never reports the round
            wait_until(lambda: any(f"round {plan.at_round}/" in text(w) or "done:" in text(w) for w in workers), 60)
        wait_until(lambda: plan.victim in procs, 10)  # a victim not started yet is hit as it starts

        victim = procs[plan.victim]
        was_alive = victim.alive()
        victim.signal_group(getattr(signal, plan.sig))
        signalled_at = time.monotonic()
        result.published = "address book sent" in text("scheduler")
        done = {w: "done:" in text(w) for w in workers}
        if not was_alive:
            result.phase = "victim gone"
        elif not result.published:
            result.phase = "registering"
        elif (done[plan.victim] if role_of(plan.victim) == "worker" else all(done.values())):
            result.phase = "finished"
        else:
            result.phase = "training"

        # One-by-one processes not started yet still start (as nodes of a real job come up on
        # their own); their time to exit counts from the signal too.
        deadline = signalled_at + DEADLINE_S
        while time.monotonic() < deadline:
            start_due()
            survivors = [n for n in procs if n != plan.victim]
            for n in survivors:
                if n not in result.exit_s and not procs[n].alive():
                    result.exit_s[n] = time.monotonic() - signalled_at
            if len(result.exit_s) == len(survivors) and not pending:
                break
            if (plan.launcher == "pslaunch" and plan.sig == "SIGSTOP" and role_of(plan.victim) == "worker"
                    and set(survivors) - set(result.exit_s) == {"pslaunch"} and "job finished" in text("scheduler")
                    and all("done:" in text(w) for w in workers)):
                result.waits_for_frozen_worker = True
                break
            time.sleep(poll_s)
        for n in procs:
            if n != plan.victim and not (n == "pslaunch" and result.waits_for_frozen_worker):
                result.exit_s.setdefault(n, None)
        result.published = result.published or "address book sent" in text("scheduler")
    finally:
        for p in procs.values():
            if p.popen or p.alive():
                p.signal_group(signal.SIGKILL)
        for p in procs.values():
            if p.popen:
                try:
                    p.code = p.popen.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        for f in files:
            f.close()
    for n, p in procs.items():
        if p.popen and n != plan.victim and result.exit_s.get(n) is not None:
            result.codes[n] = p.code
    names = NAMES + (["pslaunch"] if plan.launcher == "pslaunch" else [])
    result.output = {n: text(n) for n in names}
    patterns = _naming_patterns(plan.victim, ports)
    for n in result.exit_s:
        result.named[n] = error_names(result.output.get(n, ""), patterns)
    if plan.launcher == "pslaunch":  # the victim's own lines do not count
        result.named["job"] = error_names("\n".join(t for n, t in result.output.items() if n != plan.victim), patterns)
    return result


def work_complete(result, name):
    """Whether `name` may exit 0: a worker that printed "done:" (every round verified, final barrier
    passed); anything else once every worker did."""
    out = result.output
    if role_of(name) == "worker":
        return "done:" in out.get(name, "")
    return all("done:" in out.get(f"worker {r}", "") for r in range(WORKERS))


def problems(result):
    """What the trial got wrong; empty when it passed."""
    out = [f"hung: {n} still running {DEADLINE_S:.0f} s after the signal" for n in result.hung]
    if result.phase == "victim gone":
        return out  # the victim had exited already: nothing to detect
    for n, code in result.codes.items():
        if code == 0 and not work_complete(result, n):
            out.append(f"{n} exited 0 although its work was not complete")
    if failed(result) and not victim_named(result):
        if result.plan.launcher == "pslaunch":
            out.append("no output of the job names the victim")
        else:
            out += [f"{n} failed without naming the victim" for n in failed(result) if not result.named.get(n)]
    return out


def failed(result):
    """The survivors (or pslaunch) that exited non-zero."""
    return [n for n, code in result.codes.items() if code not in (0, None)]


def victim_named(result):
    """Under pslaunch, which stops every process at the first failure (often before they heard
    why), the job's output as a whole names the victim; one by one, every survivor that failed."""
    if result.plan.launcher == "pslaunch":
        return bool(result.named.get("job"))
    return all(result.named.get(n) for n in failed(result))
