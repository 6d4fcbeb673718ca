"""Compression through syncline.torch (issue 32): real jobs through pslaunch."""
import sys

import conftest
from conftest import EXAMPLE, final_accuracy, run_job, worker_lines


def run_checks(check, env=None, emulated_hosts=1):
    return conftest.run_checks("compression_checks.py", check, 2,
                               env={"SYNCLINE_MIN_COMPRESS_BYTES": "0", **(env or {})}, emulated_hosts=emulated_hosts)


def test_int8_sums_equal_the_python_reference():
    """The reference compresses each worker's gradient: the workers are on hosts of their own (with
    two on one host, local reduce would compress their sum once instead)."""
    run_checks("int8_sums_equal_the_python_reference", emulated_hosts=2)


def test_refusals_and_exact_broadcasts():
    run_checks("refusals_and_exact_broadcasts", env={"SYNCLINE_COMPRESSION": "int8"})


def test_job_compression_applies_to_float32_push_pulls():
    run_checks("job_compression_applies_to_float32_push_pulls",
               env={"SYNCLINE_COMPRESSION": "onebit", "SYNCLINE_MIN_COMPRESS_BYTES": "4096"})


def test_every_form_trains_through_the_distributed_optimizer():
    run_checks("every_form_trains", env={"SYNCLINE_AUTOTUNE": "0"}, emulated_hosts=2)


def test_job_compression_is_refused_in_ssp_mode_with_the_reason():
    code, out = run_job(1, [sys.executable, "-c", "import syncline.torch as bps; bps.init()"],
                        env={"SYNCLINE_COMPRESSION": "int8", "SYNCLINE_SYNC_MODE": "ssp"}, timeout=120)
    assert code != 0, out
    assert "SYNCLINE_COMPRESSION=int8 needs whole rounds (bsp or osp)" in out, out


def test_two_workers_train_the_digits_model_with_int8_and_onebit_to_uncompressed_accuracy():
    """int8 and onebit (with error feedback) reach the accuracy of the uncompressed run within 0.5 points;
    conv2 and fc1 (18 and 128 KiB) are compressed, the small tensors are not. The tuner is off: its
    partition switches depend on timing and move the chunk boundaries (onebit's scale is per chunk), so
    with it the run is not reproducible (0.975-0.997 for onebit). The workers are on hosts of their
    own, as where compression pays (a link between them); two on one host would sum locally and compress
    their sum once, which loses more per step (onebit 0.9805 against 0.9861 uncompressed, measured)."""
    accuracy = {}
    for form in ("none", "int8", "onebit"):
        code, out = run_job(2, [EXAMPLE, "--compression", form], emulated_hosts=2,
                            env={"SYNCLINE_MIN_COMPRESS_BYTES": "4096", "SYNCLINE_AUTOTUNE": "0"})
        assert code == 0, out
        accuracy[form] = final_accuracy(worker_lines(out, 0))
    for form in ("int8", "onebit"):
        assert accuracy[form] >= accuracy["none"] - 0.005, accuracy
