"""syncline.torch end to end: real jobs through the installed package's pslaunch."""
import subprocess
import sys

import pytest
import torch

import conftest
from conftest import EXAMPLE, HERE, epoch_losses, run_job, run_probe, worker_lines

CHECKS = str(HERE / "torch_checks.py")


def run_checks(check, workers=2, env=None):
    return conftest.run_checks("torch_checks.py", check, workers, env)


def test_exact_sums_and_averages_for_each_dtype():
    run_checks("exact_sums", workers=3)


def test_broadcasts_make_differently_seeded_workers_equal():
    run_checks("broadcasts")


def test_bad_calls_raise_clear_errors():
    run_checks("errors")


def test_horovod_names_of_the_collectives():
    run_checks("horovod_names", workers=3)


def test_allreduce_is_refused_in_async_mode_where_push_pull_keeps_its_meaning():
    """In async mode the servers keep a running total: Horovod's allreduce (a sum of this call's
    tensors) is refused saying so, and push_pull returns the running total, as BytePS's does."""
    script = ("import torch, syncline.torch as hvd\n"
              "hvd.init()\n"
              "try:\n"
              "    hvd.allreduce(torch.ones(3), name='metric')\n"
              "except hvd.SynclineError as e:\n"
              "    assert 'async mode' in str(e) and 'running total' in str(e), e\n"
              "else:\n"
              "    raise AssertionError('allreduce ran in async mode')\n"
              "got = hvd.push_pull(torch.ones(3), average=False, name='pushed')\n"
              "assert got.shape == (3,), got\n"
              "print('async refusal ok', flush=True)\n"
              "hvd.shutdown()")
    code, out = run_job(2, [sys.executable, "-c", script], env={"SYNCLINE_SYNC_MODE": "async"}, timeout=120)
    assert code == 0, out
    for rank in range(2):
        assert "async refusal ok" in worker_lines(out, rank), out


def test_backward_passes_per_step():
    run_checks("optimizer_passes")


def test_optimizer_and_ddp_usage_of_horovod_and_torch():
    run_checks("optimizer_api")


def test_cross_iteration_overlap_with_adam():
    run_checks("cross_iteration_adam", env={"SYNCLINE_DETERMINISTIC": 1})


def test_cross_iteration_is_off_unless_asked_for_and_reads_wait_for_updates():
    run_checks("cross_iteration_setting")


def test_cross_iteration_on_when_the_setting_says_so():
    run_checks("cross_iteration_setting", env={"SYNCLINE_CROSS_ITERATION": 1})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU here: the CUDA path is tested where one is found")
def test_cuda_tensors_through_the_device_stages():
    run_checks("cuda_sums")


def test_dead_peer_ends_push_pull_with_an_error_naming_it():
    code, out = run_job(2, [CHECKS, "dead_peer"], env={"SYNCLINE_HEARTBEAT_TIMEOUT_MS": 2000}, timeout=120)
    assert "dead_peer ok" in worker_lines(out, 0), out


def test_worker_finishing_early_ends_the_others_push_pull_naming_it_and_the_tensor():
    code, out = run_job(2, [CHECKS, "early_finish"], timeout=120)
    assert "early_finish ok" in worker_lines(out, 0), out
    assert code != 0, "the job ended as if every worker had made the same calls"


def test_calls_before_init_raise():
    probe = """
import syncline.torch as bps
for call in (bps.rank, bps.size, bps.local_rank, bps.local_size):
    try:
        call()
    except bps.NotInitializedError as e:
        assert "init()" in str(e), e
    else:
        raise SystemExit(call.__name__ + " answered before init()")
try:
    bps.init()
except bps.SynclineError as e:
    assert "pslaunch" in str(e), e
else:
    raise SystemExit("init() outside a job succeeded")
print("before-init ok")
"""
    run_probe(probe, "before-init ok", timeout=60)


def test_native_part_does_not_link_torch():
    """One build serves every torch version: nothing bundled is linked against torch."""
    import syncline._capi as capi

    for path in (capi.library_path(), *(f"{capi.native_dir()}/bin/{b}" for b in ("pslaunch", "syncline-server"))):
        ldd = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
        libraries = [line.split()[0] for line in ldd.splitlines() if line.strip()]
        assert libraries and not [lib for lib in libraries if lib.startswith(("libtorch", "libc10"))], ldd


@pytest.fixture(scope="module")
def single_process_accuracy():
    return conftest.single_process_accuracy(EXAMPLE)


@pytest.mark.parametrize("wrapper", ["optimizer", "ddp"])
def test_two_workers_train_the_digits_model(tmp_path, single_process_accuracy, wrapper):
    save = str(tmp_path / "params-{rank}.pt")
    conftest.train_example_and_check(EXAMPLE, ["--wrapper", wrapper, "--save", save], single_process_accuracy)
    params = [torch.load(save.format(rank=r)) for r in range(2)]
    assert params[0].keys() == params[1].keys()
    for name in params[0]:
        assert torch.equal(params[0][name], params[1][name]), f"{name} differs between the workers"


def test_cross_iteration_overlap_trains_to_the_same_parameters(tmp_path):
    """Updates overlapped with the next forward pass give the very same model (deterministic sums)."""
    params = {}
    for overlap in (0, 1):
        save = str(tmp_path / f"overlap{overlap}-{{rank}}.pt")
        code, out = run_job(2, [EXAMPLE, "--epochs", "5", "--save", save],
                            env={"SYNCLINE_DETERMINISTIC": 1, "SYNCLINE_CROSS_ITERATION": overlap})
        assert code == 0, out
        assert ("updates overlapping the next forward pass" in out) == bool(overlap), out
        params[overlap] = torch.load(save.format(rank=1))
    for name in params[0]:
        assert torch.equal(params[0][name], params[1][name]), f"{name} differs with cross-iteration overlap"


def test_two_workers_a_host_train_as_flat_training_does(tmp_path):
    """Four workers on two emulated hosts: each host sums its two workers' gradients before they leave
    it (local reduce, the default), and trains the digits model to the parameters of flat training
    (every worker pushing its own), up to the grouping of the additions; every worker ends equal."""
    params = {}
    for local_reduce in (1, 0):
        save = str(tmp_path / f"local{local_reduce}-{{rank}}.pt")
        code, out = run_job(4, [EXAMPLE, "--epochs", "4", "--save", save], emulated_hosts=2, timeout=400,
                            env={"SYNCLINE_DETERMINISTIC": 1, "SYNCLINE_LOCAL_REDUCE": local_reduce})
        assert code == 0, out
        assert ("local rank 1 of 2 on worker host 1 of 2 (local reduce)" in out) == bool(local_reduce), out
        losses = epoch_losses(worker_lines(out, 0))
        assert losses[-1] < 0.5 * losses[0], losses
        runs = [torch.load(save.format(rank=r)) for r in range(4)]
        for other in runs[1:]:
            for name in runs[0]:
                assert torch.equal(runs[0][name], other[name]), f"{name} differs between the workers"
        params[local_reduce] = runs[0]
    for name in params[0]:
        assert torch.allclose(params[1][name], params[0][name], rtol=1e-3, atol=1e-5), name


def test_fp16_compression_trains():
    code, out = run_job(2, [EXAMPLE, "--fp16", "--epochs", "8"])
    assert code == 0, out
    losses = epoch_losses(worker_lines(out, 0))
    assert losses[-1] < 0.5 * losses[0], losses


def test_local_rank_and_size_come_from_registration_unless_the_launcher_gives_them():
    """Workers given two emulated hosts (SYNCLINE_HOST_LABEL, odd and even ranks). Workers 0 and 1 drop
    what pslaunch says of their place (its count of the whole machine): local_rank() and local_size()
    then say their place among their host's workers, in rank order. Worker 2 keeps pslaunch's, which
    local_rank() reports (the launcher picks GPUs), and warns that registration groups it otherwise."""
    script = ("import os, syncline.torch as bps\n"
              "rank = int(os.environ['SYNCLINE_WORKER_RANK'])\n"
              "os.environ['SYNCLINE_HOST_LABEL'] = 'odd' if rank % 2 else 'even'\n"
              "if rank < 2:\n"
              "    for name in ('SYNCLINE_LOCAL_RANK', 'SYNCLINE_LOCAL_SIZE', 'BYTEPS_LOCAL_RANK', 'BYTEPS_LOCAL_SIZE'):\n"
              "        os.environ.pop(name, None)\n"
              "bps.init()\n"
              "print(f'rank {bps.rank()}: local {bps.local_rank()} of {bps.local_size()}', flush=True)\n"
              "bps.shutdown()")
    code, out = run_job(3, [sys.executable, "-c", script], timeout=120)
    assert code == 0, out
    for rank, place in ((0, "local 0 of 2"), (1, "local 0 of 1"), (2, "local 2 of 3")):
        assert f"rank {rank}: {place}" in out, out
    assert "local rank 2 of 3, but registration puts this worker at local rank 1 of 2" in out, out
