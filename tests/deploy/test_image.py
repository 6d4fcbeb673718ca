"""The container image and the chart's pods run from it: the last rung of the validation ladder.

scripts/build-image builds syncline:latest from this checkout's build (SYNCLINE_BUILD_DIR, else
build/), or finds it up to date; `helm template` renders a small job (a scheduler, 2 servers,
2 workers) and deploy/image/run_rendered.py runs its pods as containers (host network, env taken
from the rendered chart). Every container must exit 0 and every worker must have checked its
sums exactly; a failing worker must fail the whole job.

Skipped, with the reason, when helm or the chart is missing, when there is no build, or when no
Docker daemon can be started (scripts/docker-daemon).
"""
import os
import pathlib
import re
import subprocess
import sys

import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml is missing: run scripts/setup-deploy-tools")

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "syncline"
RUNNER = ROOT / "deploy" / "image" / "run_rendered.py"
IMAGE = os.environ.get("SYNCLINE_IMAGE", "syncline:latest")
BUILD_DIR = pathlib.Path(os.environ.get("SYNCLINE_BUILD_DIR", ROOT / "build"))
# A worker that joins, trains for 3 s, is killed and exits 1; the other worker trains on.
FAILING_WORKER = (
    'if [ "$JOB_COMPLETION_INDEX" = 1 ]; then '
    "timeout -s KILL 3 syncline-example-training --rounds 1000000 --quiet; "
    'echo "worker 1 fails on purpose" >&2; exit 1; fi; '
    "exec syncline-example-training --rounds 1000000 --quiet")


def _helm():
    sys.path.insert(0, str(RUNNER.parent))
    try:
        import run_rendered
    finally:
        sys.path.pop(0)
    return run_rendered.find_helm()


@pytest.fixture(scope="module")
def image():
    """Builds the image (or finds it up to date) and yields its tag; stops a daemon it started."""
    helm = _helm()
    if not CHART.is_dir() or helm is None:
        pytest.skip("no chart at deploy/helm/syncline or no helm binary: run scripts/setup-deploy-tools")
    if not (BUILD_DIR / "CMakeCache.txt").exists():
        pytest.skip(f"no build in {BUILD_DIR}: run scripts/build first (or set SYNCLINE_BUILD_DIR)")
    daemon_script = ["bash", str(ROOT / "scripts" / "docker-daemon")]
    was_running = subprocess.run(daemon_script + ["status"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 timeout=60).returncode == 0
    daemon = subprocess.run(daemon_script + ["start"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=900)
    if daemon.returncode != 0:
        pytest.skip("no Docker daemon could be started (scripts/docker-daemon start):\n" + daemon.stdout[-2000:])
    try:
        env = dict(os.environ, SYNCLINE_BUILD_DIR=str(BUILD_DIR), SYNCLINE_IMAGE=IMAGE)
        build = subprocess.run(["bash", str(ROOT / "scripts" / "build-image")], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=1800)
        print(build.stdout)
        assert build.returncode == 0, f"scripts/build-image failed:\n{build.stdout[-5000:]}"
        yield IMAGE
    finally:
        if not was_running:  # leave the machine as found (the images stay, for the next run)
            subprocess.run(daemon_script + ["stop"], stdout=subprocess.DEVNULL, timeout=120)


def run_job(image, tmp_path, values, timeout=240):
    """Renders the chart with `values` and runs it; returns (exit code, output, {label: status})."""
    values_file = tmp_path / "values.yaml"
    values_file.write_text(values)
    proc = subprocess.run([sys.executable, str(RUNNER), "--chart", str(CHART), "-f", str(values_file),
                           "--image", image, "--timeout", str(timeout)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout + 120)
    statuses = {m.group(1): int(m.group(2))
                for m in re.finditer(r"^run_rendered: (\w+(?: \d+)?) \(\S+\) exited with status (-?\d+)", proc.stdout,
                                     re.M)}
    return proc.returncode, proc.stdout, statuses


def output_of(text, label):
    prefix = f"[{label}] "
    return "\n".join(line[len(prefix):] for line in text.splitlines() if line.startswith(prefix))


@pytest.mark.parametrize("transport", ["tcp", "ucx"])
def test_rendered_job_runs_from_the_image_and_checks_exact_sums(image, tmp_path, transport):
    # The chart's own worker command and arguments (the example training, exact values).
    code, out, statuses = run_job(image, tmp_path, f"numServers: 2\nnumWorkers: 2\ntransport: {transport}\n")
    assert statuses == {"scheduler": 0, "server 0": 0, "server 1": 0, "worker 0": 0, "worker 1": 0}, out[-6000:]
    assert code == 0, out[-6000:]
    digests = set()
    for rank in range(2):
        text = output_of(out, f"worker {rank}")
        assert f"rank {rank} of 2" in text, text
        last = re.findall(r"^round (\d+)/(\d+): .*, verified$", text, re.M)
        assert last and last[-1][0] == last[-1][1], text  # the last round's sums checked exactly
        done = re.search(r"^done: (\d+) rounds, .* result digest ([0-9a-f]{16})$", text, re.M)
        assert done and done.group(1) == last[-1][1], text
        digests.add(done.group(2))
    assert len(digests) == 1, f"the workers pulled different results: {digests}"
    assert "all 2 workers and 2 servers registered" in output_of(out, "scheduler")
    assert "job finished" in output_of(out, "scheduler")


def test_pods_of_two_workers_reduce_within_the_pod_and_check_exact_sums(image, tmp_path):
    # worker.processesPerPod 2: each of the 2 worker pods runs pslaunch, which starts 2 workers; the
    # workers of a pod are one host (registration: the containers' PID namespaces differ), so each
    # pod's pair reduces locally and one copy leaves the pod.
    code, out, statuses = run_job(image, tmp_path, "numServers: 1\nnumWorkers: 4\nworker:\n  processesPerPod: 2\n")
    assert statuses == {"scheduler": 0, "server 0": 0, "worker 0": 0, "worker 1": 0}, out[-6000:]
    assert code == 0, out[-6000:]
    digests = set()
    for pod in range(2):
        text = output_of(out, f"worker {pod}")
        for local in range(2):
            rank = 2 * pod + local
            mine = output_of(text, f"worker {rank}")  # pslaunch's own prefix inside the pod
            assert f"rank {rank} of 4 (host {pod} of 2, local rank {local} of 2)" in mine, text
            last = re.findall(r"^round (\d+)/(\d+): .*, verified$", mine, re.M)
            assert last and last[-1][0] == last[-1][1], mine
            done = re.search(r"^done: (\d+) rounds, .* result digest ([0-9a-f]{16})$", mine, re.M)
            assert done, mine
            digests.add(done.group(2))
    assert len(digests) == 1, f"the workers pulled different results: {digests}"
    assert "all 4 workers and 1 servers registered" in output_of(out, "scheduler")


def test_a_failing_worker_fails_every_container(image, tmp_path):
    values = yaml.safe_dump({
        "numServers": 2,
        "numWorkers": 2,
        "worker": {"command": ["sh", "-c"], "args": [FAILING_WORKER]},
        "extraEnv": [{"name": "SYNCLINE_HEARTBEAT_INTERVAL_MS", "value": "200"},
                     {"name": "SYNCLINE_HEARTBEAT_TIMEOUT_MS", "value": "2000"},
                     {"name": "SYNCLINE_STARTUP_TIMEOUT_MS", "value": "30000"}]})
    code, out, statuses = run_job(image, tmp_path, values, timeout=120)
    assert code == 1, out[-6000:]
    assert sorted(statuses) == ["scheduler", "server 0", "server 1", "worker 0", "worker 1"], out[-6000:]
    assert statuses["worker 1"] == 1, out[-6000:]
    assert all(status != 0 for status in statuses.values()), statuses
    assert "worker 1 fails on purpose" in output_of(out, "worker 1")
    for label in ["scheduler", "server 0", "server 1", "worker 0"]:
        text = output_of(out, label)
        # Every survivor names the dead worker (or, had it been killed before joining, the
        # scheduler's startup deadline counts the missing one).
        assert re.search(r"worker 1 .*presumed dead|only 1 of 2 workers", text), (label, text[-3000:])
