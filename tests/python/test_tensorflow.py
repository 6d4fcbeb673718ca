"""syncline.tensorflow end to end: real jobs through the installed package's pslaunch."""
import pytest

import conftest
from conftest import run_probe

pytest.importorskip("tensorflow")


def run_checks(check, workers=2):
    conftest.run_checks("tf_checks.py", check, workers)


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
    run_probe(probe, "before-init ok", TF_CPP_MIN_LOG_LEVEL=2)
