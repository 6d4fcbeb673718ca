"""Scripts written for byteps or horovod never call shutdown(): the shims leave the job at exit."""
import time

from conftest import HERE, run_job, worker_lines

SCRIPTS = HERE / "scripts"


def assert_ends_cleanly(script):
    code, out = run_job(2, [str(SCRIPTS / script)])
    for rank in range(2):
        assert any(line.startswith(f"rank {rank}: ") and "samples/s" in line for line in worker_lines(out, rank)), out
    assert "still running" not in out, out  # the launcher did not have to stop the scheduler and servers
    assert code == 0, out
    return out


def test_torch_script_without_shutdown_ends_cleanly():
    assert_ends_cleanly("synthetic_torch.py")


def test_tensorflow_script_without_shutdown_ends_cleanly_and_autograph_leaves_the_shim_alone():
    out = assert_ends_cleanly("synthetic_tf.py")
    assert "AutoGraph could not transform" not in out, out


def test_unhandled_exception_fails_the_job_at_once_naming_the_worker():
    """Leaving at exit does not wait for the failed worker's operations: the job ends now, not when
    they time out."""
    start = time.monotonic()
    code, out = run_job(2, [str(SCRIPTS / "synthetic_torch.py"), "--steps", "1000000", "--raise-on-rank", "1"],
                        timeout=120)
    assert code != 0, out
    assert "RuntimeError: the user's script failed" in "\n".join(worker_lines(out, 1)), out
    assert "worker 1 exited with status 1" in out, out
    assert time.monotonic() - start < 60, out
