"""`pslaunch --hosts` across emulated hosts (bench/cluster): Debian's openssh-server
runs in each host's network namespace, pslaunch (in host 0) starts the scheduler,
servers and workers on them over real ssh, relays their output with host
prefixes, and stops everything everywhere when a worker fails or pslaunch is
killed.

Needs root (network namespaces) and /usr/sbin/sshd (openssh-server, listed in
scripts/install-deps); skipped with the reason elsewhere."""
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import EXAMPLE, PSLAUNCH, BIN

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "cluster"))

import netcluster  # noqa: E402

SSHD = "/usr/sbin/sshd"
SSH_PORT = 2222  # not 22: nothing of the machine's own is confused with these


def _unavailable():
    for tool in (SSHD, shutil.which("ssh"), shutil.which("ssh-keygen")):
        if tool is None or not os.access(tool, os.X_OK):
            return "openssh-server/openssh-client are not installed (apt-get install openssh-server openssh-client)"
    return netcluster.probe()


UNAVAILABLE = _unavailable()
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"pslaunch --hosts tests skipped: {UNAVAILABLE}")

HOSTS = 3


def _sshd_config(tmp, address, i):
    path = tmp / f"sshd-h{i}.conf"
    path.write_text("\n".join([
        f"ListenAddress {address}",
        f"Port {SSH_PORT}",
        f"HostKey {tmp / 'host_key'}",
        f"PidFile {tmp / f'sshd-h{i}.pid'}",
        f"AuthorizedKeysFile {tmp / 'authorized_keys'}",
        "StrictModes no",
        "UsePAM no",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PrintMotd no",
        "LogLevel INFO",
        "",
    ]))
    return path


@contextlib.contextmanager
def ssh_cluster():
    """An emulated cluster of HOSTS hosts, each running sshd; yields (cluster, ssh command for --ssh).
    Everything (processes, namespaces, keys) is removed afterwards, also on failure."""
    tmp = Path(tempfile.mkdtemp(prefix="pslaunch-hosts-"))
    made_run_sshd = not os.path.isdir("/run/sshd")
    try:
        if made_run_sshd:
            os.makedirs("/run/sshd", mode=0o755)  # sshd's privilege-separation directory
        for name in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / name)], check=True,
                           timeout=30)
        shutil.copy(tmp / "client_key.pub", tmp / "authorized_keys")
        with netcluster.EmulatedCluster(HOSTS, rate="1gbit", timeout=280) as c:
            daemons = [c.start(i, [SSHD, "-D", "-e", "-f", str(_sshd_config(tmp, c.address(i), i))], name=f"sshd-h{i}")
                       for i in range(HOSTS)]
            deadline = time.monotonic() + 20
            while not all("Server listening" in d.output() for d in daemons):
                for d in daemons:
                    assert d.returncode is None, f"sshd in {d.host} exited: {d.output()}"
                assert time.monotonic() < deadline, "sshd did not start: " + " | ".join(d.output() for d in daemons)
                time.sleep(0.1)
            # The test's hosts are new each run: trust their keys on first use (pslaunch sets no policy).
            ssh = (f"ssh -F /dev/null -i {tmp / 'client_key'} -o IdentitiesOnly=yes "
                   f"-o UserKnownHostsFile={tmp / 'known_hosts'} -o StrictHostKeyChecking=accept-new -p {SSH_PORT}")
            yield c, ssh
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if made_run_sshd:
            shutil.rmtree("/run/sshd", ignore_errors=True)


def job_processes(c, nodes_only=False):
    """'hI: pid cmdline' of every Syncline process (and remote wrapper, unless `nodes_only`) alive in the
    cluster."""
    found = []
    for i in range(HOSTS):
        for pid in netcluster.namespace_pids(c.namespace(i)):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            argv0 = os.path.basename(cmd[0].decode(errors="replace"))
            if argv0.startswith("syncline-") or (not nodes_only and (b"pslaunch-remote" in cmd or argv0 == "pslaunch")):
                found.append(f"h{i}: {pid} {b' '.join(cmd).decode(errors='replace')[:100]}")
    return found


def _read_bytes(path):
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""


def wait_until_none_left(c, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = job_processes(c)
        if not left:
            return []
        time.sleep(0.2)
    return job_processes(c)


def hosts_arg(c):
    return ",".join(c.address(i) for i in range(HOSTS))


def pslaunch(c, ssh, *args, name="pslaunch", hosts=None):
    hosts = hosts or ["--hosts", hosts_arg(c)]
    return c.start(0, [PSLAUNCH, *hosts, "--ssh", ssh, "--workers", "3", "--servers", "2",
                       "--grace", "3", *args], env=os.environ | {"PATH": f"{BIN}:{os.environ.get('PATH', '')}"},
                   name=name)


def test_job_across_three_hosts_over_ssh():
    with ssh_cluster() as (c, ssh):
        start = time.monotonic()
        proc = pslaunch(c, ssh, "--timeout", "150", "--", EXAMPLE, "--values", "exact", "--rounds", "5")
        code, = c.wait([proc], timeout=180)
        out = proc.output()
        elapsed = time.monotonic() - start
        assert code == 0, out
        a = [c.address(i) for i in range(HOSTS)]
        # Placement: scheduler on the first host, servers and workers round-robin.
        expected = {"scheduler": a[0], "server 0": a[0], "server 1": a[1],
                    "worker 0": a[0], "worker 1": a[1], "worker 2": a[2]}
        for label, host in expected.items():
            assert re.search(rf"^\[{label} @{re.escape(host)}\] ", out, re.M), (label, out)
        # Every line the processes wrote came with its role and host.
        for line in out.splitlines():
            if not line.startswith("pslaunch: "):
                assert re.match(r"\[(scheduler|server \d|worker \d) @10\.213\.0\.\d\] ", line), line
        for r in range(3):
            assert re.search(rf"^\[worker {r} @{re.escape(a[r])}\] round 5/5: .*, verified$", out, re.M), out
            assert re.search(rf"^\[worker {r} @{re.escape(a[r])}\] done: 5 rounds", out, re.M), out
        digests = set(re.findall(r"result digest ([0-9a-f]{16})", out))
        assert len(digests) == 1, out
        assert f"scheduler at {a[0]}:9000" in out, out
        assert wait_until_none_left(c, 10) == []
        print(f"3-host job over ssh: {elapsed:.1f} s")


def test_a_failing_worker_stops_every_host():
    with ssh_cluster() as (c, ssh):
        # Workers 0 and 1 would train for minutes; worker 2 fails after 3 s.
        worker = ("if [ \"$SYNCLINE_WORKER_RANK\" = 2 ]; then sleep 3; echo giving up; exit 1; fi; "
                  f"exec {EXAMPLE} --values exact --rounds 1000000 --quiet")
        start = time.monotonic()
        proc = pslaunch(c, ssh, "--timeout", "120", "--", "sh", "-c", worker)
        code, = c.wait([proc], timeout=60)
        out = proc.output()
        assert code == 1, out
        assert f"[worker 2 @{c.address(2)}] giving up" in out, out
        assert f"pslaunch: worker 2 @{c.address(2)} exited with status 1" in out, out
        assert time.monotonic() - start < 30, out
        left = wait_until_none_left(c, 15)
        assert left == [], (left, out)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_stopped_pslaunch_leaves_nothing_on_the_hosts(tmp_path, sig):
    with ssh_cluster() as (c, ssh):
        hostfile = tmp_path / "hosts"
        hostfile.write_text("# the emulated hosts\n" + "".join(f"{c.address(i)} slots=2\n" for i in range(HOSTS)))
        token = "hostsjob" + os.urandom(8).hex()
        proc = pslaunch(c, ssh, "--token", token, "--", EXAMPLE, "--values", "exact", "--rounds", "1000000",
                        "--quiet", hosts=["--hostfile", str(hostfile)])
        # slots=2: h0 runs the scheduler and server 0, h1 server 1 and worker 0, h2 workers 1 and 2.
        deadline = time.monotonic() + 60
        while len(job_processes(c, nodes_only=True)) < 6:
            assert proc.returncode is None, proc.output()
            assert time.monotonic() < deadline, (job_processes(c), proc.output())
            time.sleep(0.2)
        assert [p.split(":")[0] for p in sorted(job_processes(c, nodes_only=True))] == ["h0", "h0", "h1", "h1", "h2",
                                                                                         "h2"], job_processes(c)
        # The token is on no command line, local (ssh) or remote (wrappers, nodes): `ps` would show it.
        # pslaunch's own has it (given with --token here); the nodes hold it in their environment.
        on_command_lines = [pid for pid in os.listdir("/proc") if pid.isdigit() and int(pid) != proc.popen.pid
                            and token.encode() in _read_bytes(f"/proc/{pid}/cmdline")]
        assert on_command_lines == [], on_command_lines
        nodes = [int(p.split()[1]) for p in job_processes(c, nodes_only=True)]
        assert all(f"SYNCLINE_JOB_TOKEN={token}".encode() in _read_bytes(f"/proc/{pid}/environ").split(b"\0")
                   for pid in nodes), nodes
        time.sleep(1)
        start = time.monotonic()
        # SIGKILL: pslaunch does nothing, only its closed pipe tells the hosts. SIGTERM: it stops the job.
        os.kill(proc.popen.pid, sig)
        code = proc.popen.wait(timeout=20)
        if sig == signal.SIGTERM:
            assert code == 143 and "received SIGTERM; stopping the job" in proc.output(), proc.output()
        left = wait_until_none_left(c, 20)
        assert left == [], (left, proc.output())
        print(f"remote processes gone {time.monotonic() - start:.1f} s after {signal.Signals(sig).name} of pslaunch")


def test_ssh_failures_name_the_host():
    with ssh_cluster() as (c, ssh):
        # Nothing listens on port 2223: ssh's own error, prefixed with the host.
        bad = ssh.replace(f"-p {SSH_PORT}", "")
        proc = c.start(0, [PSLAUNCH, "--hosts", f"{c.address(0)},{c.address(2)}", "--ssh", bad, "--ssh-port", "2223",
                           "--workers", "1", "--servers", "1", "--timeout", "60", "--", EXAMPLE], name="pslaunch-bad")
        code, = c.wait([proc], timeout=90)
        out = proc.output()
        assert code == 255, out
        assert re.search(r"\[\w+( \d)? @10\.213\.0\.\d\] ssh: connect to host 10\.213\.0\.\d port 2223: "
                         r"Connection refused", out), out
        assert "255 is ssh's status" in out, out
        # A key the hosts do not accept.
        proc = pslaunch(c, ssh.replace("client_key", "host_key"), "--timeout", "60", "--", EXAMPLE, name="badkey")
        code, = c.wait([proc], timeout=90)
        out = proc.output()
        assert code == 255, out
        assert re.search(r"\[\w+( \d)? @10\.213\.0\.\d\] root@10\.213\.0\.\d: Permission denied \(publickey\)", out), out
        assert wait_until_none_left(c, 10) == []
