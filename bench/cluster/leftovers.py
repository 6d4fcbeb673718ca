"""What an emulated cluster leaves on the machine, and removing it: its network
namespaces (slc-<run>-*, which hold its links), the processes inside them, its
state file (/run/syncline-cluster/<run>.json, naming the orchestrator) and its
log folder. cleanup() is what `cluster.py cleanup` and every new cluster run."""
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

PREFIX = "slc-"
STATE_DIR = Path("/run/syncline-cluster")


class ClusterError(RuntimeError):
    """Setting up or running the emulated cluster failed."""


class NoPrivileges(ClusterError):
    """This process may not create network namespaces (not root, or a restricted container)."""


def _sh(argv, check=True, timeout=30):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        msg = proc.stderr.strip() or proc.stdout.strip()
        if "Operation not permitted" in msg or "Permission denied" in msg:
            raise NoPrivileges(f"{' '.join(argv)}: {msg} (the emulated cluster needs root: CAP_SYS_ADMIN and CAP_NET_ADMIN)")
        raise ClusterError(f"{' '.join(argv)}: {msg}")
    return proc


def list_namespaces(prefix=PREFIX):
    try:
        out = _sh(["ip", "netns", "list"], check=False).stdout
    except FileNotFoundError:
        return []
    return sorted(line.split()[0] for line in out.splitlines() if line.split() and line.split()[0].startswith(prefix))


def list_root_links(prefix=PREFIX):
    """Links of the root namespace whose name starts with `prefix` (this module makes none; cleanup removes any)."""
    out = _sh(["ip", "-o", "link", "show"], check=False).stdout
    names = [m.group(1) for m in re.finditer(r"^\d+: ([^:@\s]+)", out, re.M)]
    return [n for n in names if n.startswith(prefix)]


def namespace_pids(namespace):
    out = _sh(["ip", "netns", "pids", namespace], check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def _kill_namespace_processes(namespaces):
    """SIGKILLs every process in `namespaces` until none is left (bounded)."""
    for _ in range(50):
        pids = [p for ns in namespaces for p in namespace_pids(ns)]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def _process_start_time(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _run_id_of(name, prefix):
    return name[len(prefix):].split("-", 1)[0]


def _owner_alive(run_id):
    try:
        state = json.loads((STATE_DIR / f"{run_id}.json").read_text())
    except (OSError, ValueError):
        return False
    return _process_start_time(state.get("pid", -1)) == state.get("start_time")


def cleanup(run_id=None, only_stale=False, prefix=PREFIX):
    """Removes what emulated clusters left behind: processes in their namespaces,
    the namespaces (which takes their links), `prefix`* links of the root
    namespace, state files and log folders. run_id: only that run's;
    only_stale: only runs whose owning process is gone. Returns the names removed."""
    if os.geteuid() != 0:
        raise NoPrivileges("removing the emulated cluster's network namespaces needs root")
    start = prefix + (run_id + "-" if run_id else "")
    namespaces = list_namespaces(start)
    runs = {_run_id_of(ns, prefix) for ns in namespaces}
    if STATE_DIR.is_dir():
        runs |= {p.stem for p in STATE_DIR.glob("*.json") if run_id in (None, p.stem)}
    if only_stale:
        runs = {r for r in runs if not _owner_alive(r)}
    namespaces = [ns for ns in namespaces if _run_id_of(ns, prefix) in runs]
    _kill_namespace_processes(namespaces)
    removed = []
    for ns in namespaces:
        if _sh(["ip", "netns", "delete", ns], check=False).returncode == 0:
            removed.append(ns)
    if not only_stale:
        for link in list_root_links(start):
            if _sh(["ip", "link", "delete", link], check=False).returncode == 0:
                removed.append(link)
    for r in runs:
        state_file = STATE_DIR / f"{r}.json"
        try:
            state = json.loads(state_file.read_text())
            logs = state.get("log_dir")
            if logs and Path(logs).name.startswith(prefix) and not state.get("keep_logs"):
                shutil.rmtree(logs, ignore_errors=True)
        except (OSError, ValueError):
            pass
        state_file.unlink(missing_ok=True)
    return removed
