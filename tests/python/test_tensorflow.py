"""syncline.tensorflow end to end: real jobs through the installed package's pslaunch."""
import subprocess
import sys

import pytest

from conftest import HERE, clean_env, run_job, worker_lines

pytest.importorskip("tensorflow")
CHECKS = str(HERE / "tf_checks.py")


def run_checks(check, workers=2):
    code, out = run_job(workers, [CHECKS, check])
    for rank in range(workers):
        assert f"{check} ok" in worker_lines(out, rank), out
    assert code == 0, out


def test_exact_sums_eager_and_in_tf_function():
    run_checks("exact_sums", workers=3)


def test_gradient_tape_and_broadcasts():
    run_checks("tape_and_broadcast")


def test_bad_calls_raise_clear_errors():
    run_checks("errors")


def test_calls_before_init_raise():
    probe = """
import syncline.tensorflow as bps
try:
    bps.rank()
except bps.NotInitializedError as e:
    assert "init()" in str(e), e
else:
    raise SystemExit("rank() answered before init()")
print("before-init ok")
"""
    out = subprocess.run([sys.executable, "-c", probe], env=clean_env(TF_CPP_MIN_LOG_LEVEL=2), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "before-init ok" in out.stdout, out.stdout + out.stderr
