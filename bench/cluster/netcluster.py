"""EmulatedCluster: K hosts on one machine, as Linux network namespaces joined by
a bridge, each link rate-limited in both directions (tc tbf), so that processes
see a cluster's network: their own address, and a link that is the bottleneck.

    with EmulatedCluster(hosts=7, rate="1gbit") as c:
        proc = c.start(0, ["python3", "-c", "print('hi')"])
        c.wait([proc], timeout=10)
        print(c.address(0), proc.output())

Layout, all of it in namespaces this class creates (nothing touches the root
namespace's links or addresses):

    namespace slc-<run>-br:  bridge slc-<run>-br, ports slc-<run>-b<i>
    namespace slc-<run>-h<i>: veth slc-<run>-h<i> with SUBNET.(i+1), and lo
    egress of slc-<run>-h<i> (host -> bridge): tbf at `rate`   (the host's uplink)
    egress of slc-<run>-b<i> (bridge -> host): tbf at `rate`   (the host's downlink)

Every process started here runs in its own process group with a deadline, and
teardown() (on leaving the `with`, at exit, on SIGINT/SIGTERM/SIGHUP, and at
the deadline) kills every process in the namespaces and deletes them. A run
killed with SIGKILL leaves its namespaces; cleanup() removes them, and every
new cluster first removes those whose owning process is gone (a state file in
/run/syncline-cluster names the owner).

Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), iproute2 (ip, tc) and the
kernel's bridge, veth and sch_tbf. probe() says whether this machine can.
"""
import atexit
import ctypes
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from leftovers import (PREFIX, STATE_DIR, ClusterError, NoPrivileges, _process_start_time, _sh,  # noqa: F401
                       cleanup, list_namespaces, list_root_links, namespace_pids, _kill_namespace_processes)
from links import PEAK_FACTOR, QUEUE_LATENCY_MS, format_rate, parse_rate, tbf_params  # noqa: F401

DEFAULT_SUBNET = "10.213.0.0/24"
DEFAULT_TIMEOUT_S = 300
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    """A signal (or the cluster's deadline) stopped the run; teardown follows."""

    def __init__(self, signum, reason):
        super().__init__(reason)
        self.signum = signum


def probe():
    """None if this process can build an emulated cluster here, else the reason it cannot."""
    if os.geteuid() != 0:
        return "the emulated cluster needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN to create network namespaces)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"'{tool}' (iproute2) is not installed"
    try:
        with EmulatedCluster(hosts=1, rate="1gbit", timeout=30, handle_signals=False):
            pass
    except (ClusterError, OSError) as e:
        return f"cannot create network namespaces with a rate-limited veth here: {e}"
    return None


_libc = ctypes.CDLL(None, use_errno=True)


def _child_setup():
    # Runs in the child between fork and exec: die (SIGTERM) with the orchestrator.
    _libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Proc:
    """A process started in a host of the cluster; output goes to a log file."""

    def __init__(self, host, name, popen, log_path):
        self.host, self.name, self.popen, self.log_path = host, name, popen, log_path

    @property
    def returncode(self):
        return self.popen.poll()

    def output(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


class EmulatedCluster:
    """K emulated hosts. Not thread-safe: use from one thread (the main thread,
    for the signal handlers and the deadline alarm)."""

    def __init__(self, hosts, rate=None, subnet=DEFAULT_SUBNET, run_id=None, timeout=DEFAULT_TIMEOUT_S,
                 mtu=1500, queue_ms=QUEUE_LATENCY_MS, sysctls=None, prefix=PREFIX, keep_logs=False,
                 handle_signals=True, peak_factor=PEAK_FACTOR):
        self.net = ipaddress.ip_network(subnet)
        if not 1 <= hosts <= min(250, self.net.num_addresses - 2):
            raise ValueError(f"{hosts} hosts do not fit in {subnet} (1..250)")
        self.hosts, self.rate, self.mtu, self.queue_ms, self.prefix = hosts, parse_rate(rate), mtu, queue_ms, prefix
        self.peak_factor = peak_factor
        self.run_id = run_id or os.urandom(3).hex()
        if not re.fullmatch(r"[0-9a-z]{1,6}", self.run_id):
            raise ValueError("a run id is 1..6 characters of [0-9a-z]")
        self.timeout, self.keep_logs, self.handle_signals = timeout, keep_logs, handle_signals
        self.sysctls = dict(sysctls or {})
        self.bridge_ns = f"{prefix}{self.run_id}-br"
        self.procs, self.log_dir, self.created = [], None, False
        self._old_handlers, self._deadline, self._tearing_down = {}, None, False

    # ---- names and addresses -------------------------------------------------
    def namespace(self, i):
        return f"{self.prefix}{self.run_id}-h{i}"

    def host_link(self, i):
        return f"{self.prefix}{self.run_id}-h{i}"

    def bridge_port(self, i):
        return f"{self.prefix}{self.run_id}-b{i}"

    def address(self, i):
        return str(self.net.network_address + i + 1)

    def namespaces(self):
        return [self.bridge_ns] + [self.namespace(i) for i in range(self.hosts)]

    # ---- lifecycle -------------------------------------------------------------
    def __enter__(self):
        try:
            self.create()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc):
        self.teardown()
        return False

    def create(self):
        if os.geteuid() != 0:
            raise NoPrivileges("the emulated cluster needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN to create network namespaces)")
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for s in (*_SIGNALS, signal.SIGALRM):
                self._old_handlers[s] = signal.signal(s, self._on_signal)
            signal.alarm(int(self.timeout) + 1)
        self._deadline = time.monotonic() + self.timeout
        atexit.register(self.teardown)
        cleanup(only_stale=True, prefix=self.prefix)
        if list_namespaces(f"{self.prefix}{self.run_id}-") or (STATE_DIR / f"{self.run_id}.json").exists():
            raise ClusterError(f"run id {self.run_id} is in use by another emulated cluster")
        self.log_dir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}{self.run_id}-"))
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        (STATE_DIR / f"{self.run_id}.json").write_text(json.dumps(
            {"pid": os.getpid(), "start_time": _process_start_time(os.getpid()), "log_dir": str(self.log_dir),
             "keep_logs": self.keep_logs, "namespaces": self.namespaces()}))
        self.created = True
        br = self.bridge_ns
        _sh(["ip", "netns", "add", br])
        _sh(["ip", "-n", br, "link", "set", "lo", "up"])
        _sh(["ip", "-n", br, "link", "add", br, "type", "bridge"])
        _sh(["ip", "-n", br, "link", "set", br, "up"])
        for i in range(self.hosts):
            ns, link, port = self.namespace(i), self.host_link(i), self.bridge_port(i)
            _sh(["ip", "netns", "add", ns])
            # IPv4 only: no IPv6 link-local chatter through the shapers (best effort).
            _sh(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1",
                 "net.ipv6.conf.default.disable_ipv6=1"], check=False)
            _sh(["ip", "-n", br, "link", "add", port, "mtu", str(self.mtu), "type", "veth",
                 "peer", "name", link, "mtu", str(self.mtu), "netns", ns])
            _sh(["ip", "-n", br, "link", "set", port, "master", br, "up"])
            _sh(["ip", "-n", ns, "link", "set", "lo", "up"])
            _sh(["ip", "-n", ns, "addr", "add", f"{self.address(i)}/{self.net.prefixlen}", "dev", link])
            _sh(["ip", "-n", ns, "link", "set", link, "up"])
            for key, value in self.sysctls.items():
                _sh(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"{key}={value}"])
            self._shape(i, self.rate, "add")

    def _shape(self, i, bits, verb):
        for ns, dev in ((self.namespace(i), self.host_link(i)), (self.bridge_ns, self.bridge_port(i))):
            if bits is None:
                _sh(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)
                continue
            _sh(["tc", "-n", ns, "qdisc", verb, "dev", dev, "root", "tbf", *tbf_params(bits, self.mtu, self.queue_ms, self.peak_factor)])

    def set_rate(self, rate, hosts=None):
        """Changes the link rate (both directions) of `hosts` (default: all); None = unlimited."""
        bits = parse_rate(rate)
        for i in range(self.hosts) if hosts is None else hosts:
            self._shape(i, bits, "replace")
        if hosts is None:
            self.rate = bits

    def link_stats(self, i):
        """Bytes and drops the shapers of host i passed: {'up': {...}, 'down': {...}}."""
        out = {}
        for key, ns, dev in (("up", self.namespace(i), self.host_link(i)), ("down", self.bridge_ns, self.bridge_port(i))):
            text = _sh(["tc", "-s", "-n", ns, "qdisc", "show", "dev", dev]).stdout
            m = re.search(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+)", text)
            out[key] = {"qdisc": text.split()[1] if text.split() else "", "bytes": int(m.group(1)) if m else 0,
                        "dropped": int(m.group(3)) if m else 0, "overlimits": int(m.group(4)) if m else 0}
        return out

    def teardown(self):
        """Kills every process in the cluster and deletes its namespaces (idempotent)."""
        if self._tearing_down:
            return
        self._tearing_down = True
        try:
            if self._old_handlers:
                signal.alarm(0)
            self.stop_processes(grace=2.0)
            if self.created:
                cleanup(run_id=self.run_id, prefix=self.prefix)
                if self.log_dir and not self.keep_logs:
                    shutil.rmtree(self.log_dir, ignore_errors=True)
        finally:
            for s, h in self._old_handlers.items():
                signal.signal(s, h)
            self._old_handlers = {}
            self.created = False
            atexit.unregister(self.teardown)

    def _on_signal(self, signum, frame):
        if self._tearing_down:
            return
        if signum == signal.SIGALRM:
            raise Interrupted(signum, f"the emulated cluster's deadline ({self.timeout} s) passed")
        raise Interrupted(signum, f"stopped by signal {signal.Signals(signum).name}")

    def remaining(self):
        return max(0.0, self._deadline - time.monotonic()) if self._deadline else self.timeout

    # ---- processes -------------------------------------------------------------
    def start(self, host, argv, env=None, name=None):
        """Starts argv in host `host` (its own process group); stdout+stderr go to a log file."""
        if not self.created:
            raise ClusterError("the cluster is not up")
        name = name or f"h{host}-{Path(argv[0]).name}-{len(self.procs)}"
        log_path = self.log_dir / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".log")
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(["ip", "netns", "exec", self.namespace(host), *map(str, argv)],
                                     env=None if env is None else {k: str(v) for k, v in env.items()},
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=_child_setup)
        proc = Proc(host, name, popen, log_path)
        self.procs.append(proc)
        return proc

    def wait(self, procs, timeout=None):
        """Waits for `procs` until `timeout` (and the cluster's deadline); returns their
        exit codes, None for those still running then (which are left running)."""
        limit = self.remaining() if timeout is None else min(timeout, self.remaining())
        end = time.monotonic() + limit
        codes = []
        for p in procs:
            try:
                codes.append(p.popen.wait(timeout=max(0.0, end - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(None)
        return codes

    def run(self, host, argv, env=None, timeout=None, name=None):
        """Runs argv in host `host` to completion; returns (exit code or None on timeout, output).
        A process still running at the timeout is killed."""
        proc = self.start(host, argv, env, name)
        code, = self.wait([proc], timeout)
        if code is None:
            self.kill(proc)
        return code, proc.output()

    def kill(self, proc, grace=0.0):
        """SIGTERM to proc's process group and `grace` seconds to exit (when grace > 0), then SIGKILL."""
        if grace > 0 and self._signal_and_wait(proc, signal.SIGTERM, grace):
            return
        self._signal_and_wait(proc, signal.SIGKILL, 5.0)

    @staticmethod
    def _signal_and_wait(proc, sig, seconds):
        """True once proc has exited (at once if it already had)."""
        if proc.popen.poll() is not None:
            return True
        try:
            os.killpg(proc.popen.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.popen.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop_processes(self, grace=2.0):
        """SIGTERM to every running process group, SIGKILL after `grace`, then any
        process left in the namespaces."""
        running = [p for p in self.procs if p.popen.poll() is None]
        for p in running:
            try:
                os.killpg(p.popen.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = time.monotonic() + grace
        for p in running:
            try:
                p.popen.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill(p)
        if self.created:
            _kill_namespace_processes(self.namespaces())
        for p in self.procs:
            try:
                p.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
