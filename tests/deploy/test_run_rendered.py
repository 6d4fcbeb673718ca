"""deploy/image/run_rendered.py without docker: how rendered pods become containers.

The fixture is a hand-written stand-in for `helm template` output (tests/deploy/fixtures);
when helm and the chart are present, the chart's own rendering is planned too, so a change
to the chart that the runner cannot play fails here, in seconds, rather than in the image test.
"""
import importlib.util
import pathlib
import subprocess

import pytest

pytest.importorskip("yaml", reason="pyyaml is missing: run scripts/setup-deploy-tools")

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "rendered-small.yaml"
CHART = ROOT / "deploy" / "helm" / "syncline"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "deploy" / "image" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rr = _load("run_rendered")  # the runner's command line
rp = _load("rendered_pods")  # manifests -> containers


def planned(text=None, **kwargs):
    docs = rp.load_manifests(text if text is not None else FIXTURE.read_text())
    return {c.label: c for c in rp.plan(docs, "p", **kwargs)}


def test_every_pod_of_every_job_becomes_one_container():
    containers = planned()
    assert list(containers) == ["scheduler", "server 0", "server 1", "worker 0", "worker 1"]
    assert containers["scheduler"].name == "p-t-syncline-scheduler"
    assert containers["worker 1"].name == "p-t-syncline-worker-1"
    assert {c.image for c in containers.values()} == {"syncline:latest"}
    assert planned(image="other:1")["server 0"].image == "other:1"


def test_env_resolves_field_refs_secrets_and_config_maps():
    containers = planned()
    for label, c in containers.items():
        assert c.env["SYNCLINE_HOST"] == "127.0.0.1", label
        assert c.env["SYNCLINE_JOB_TOKEN"] == "small-job-token", label
        assert c.env["DMLC_PS_ROOT_URI"] == "t-syncline-scheduler", label
    for i in range(2):
        w = containers[f"worker {i}"].env
        assert w["DMLC_WORKER_ID"] == str(i)
        assert w["JOB_COMPLETION_INDEX"] == str(i)  # Kubernetes sets it in Indexed Jobs' pods
        assert w["POD_NAME"] == f"t-syncline-worker-{i}"
        assert w["TEAM"] == "ml"
        assert w["PASSWORD"] == "plain-text"  # stringData
        assert w["LABEL"] == f"t-syncline-worker-{i}/{i}"  # $(VAR) of earlier variables
        assert containers[f"server {i}"].env["SYNCLINE_PARTITION_BYTES"] == "65536"
        assert containers[f"server {i}"].env["JOB_COMPLETION_INDEX"] == str(i)
    assert "JOB_COMPLETION_INDEX" not in containers["scheduler"].env  # not an Indexed Job
    # The environment keeps the manifest's order after JOB_COMPLETION_INDEX.
    assert list(containers["worker 0"].env)[:3] == ["JOB_COMPLETION_INDEX", "DMLC_ROLE", "DMLC_PS_ROOT_URI"]


def test_token_option_replaces_the_rendered_token():
    containers = planned(token="other-token")
    assert {c.env["SYNCLINE_JOB_TOKEN"] for c in containers.values()} == {"other-token"}


def test_command_args_workdir_and_user_map_as_kubernetes_defines_them():
    containers = planned()
    s = containers["scheduler"]
    assert (s.entrypoint, s.args, s.user, s.workdir) == ("syncline-scheduler", [], None, None)
    w = containers["worker 1"]
    assert w.entrypoint == "sh"
    # $(VAR) expands, $$ is a literal $, an undefined reference stays as written.
    assert w.args == ["-c", "echo t-syncline-worker-1 $HOME $(UNDEFINED) && exec syncline-example-training --rounds 7"]
    assert (w.workdir, w.user) == ("/tmp", "2000:3000")


def test_services_and_indexed_pods_resolve_to_the_host():
    hosts = planned()["worker 0"].hosts
    for name in ["t-syncline-scheduler", "t-syncline-scheduler.default.svc.cluster.local", "t-syncline-servers",
                 "t-syncline-server-1.t-syncline-servers", "t-syncline-worker-0.t-syncline-workers"]:
        assert name in hosts
    assert "t-syncline-scheduler.training.svc" in planned(namespace="training")["server 0"].hosts


def test_expand():
    env = {"A": "1", "B": "x y"}
    assert rp.expand("$(A)-$(B)", env) == "1-x y"
    assert rp.expand("$$(A) $(C) $", env) == "$(A) $(C) $"


def test_what_cannot_be_mapped_is_an_error_that_names_it():
    text = FIXTURE.read_text()
    with pytest.raises(rp.RunnerError, match="t-syncline-scheduler: port 9123 goes to 9124"):
        planned(text.replace("containerPort: 9123", "containerPort: 9124"))
    with pytest.raises(rp.RunnerError, match="fieldRef spec.hostname is not supported"):
        planned(text.replace("fieldPath: metadata.name", "fieldPath: spec.hostname"))
    with pytest.raises(rp.RunnerError, match="env SYNCLINE_JOB_TOKEN: Secret 't-syncline-token' has no key 'tok'"):
        planned(text.replace("key: token", "key: tok"))
    with pytest.raises(rp.RunnerError, match="Secret 'gone' is not in the manifests"):
        planned(text.replace("name: extra, key", "name: gone, key"))
    with pytest.raises(rp.RunnerError, match="parallelism below completions"):
        planned(text.replace("completions: 2\n  parallelism: 2", "completions: 2\n  parallelism: 1"))
    with pytest.raises(rp.RunnerError, match="no Job"):
        planned("kind: Service\nmetadata: {name: s}\nspec: {}\n")


def test_dry_run_prints_the_plan_without_the_token(capsys):
    assert rr.main([str(FIXTURE), "--dry-run", "--prefix", "d"]) == 0
    out = capsys.readouterr().out
    assert "d-t-syncline-worker-1 [worker 1]" in out
    assert "SYNCLINE_JOB_TOKEN=<secret>" in out and "small-job-token" not in out


def test_the_chart_renders_pods_the_runner_can_play():
    helm = rr.find_helm()
    if not helm or not CHART.is_dir():
        pytest.skip("no helm or no chart at deploy/helm/syncline: run scripts/setup-deploy-tools")
    values = {"numServers": 2, "numWorkers": 2, "jobToken": "t0k"}
    sets = [f"{k}={v}" for k, v in values.items()] + ["scheduler.port=9321"]
    proc = subprocess.run([helm, "template", "r", str(CHART), *sum((["--set", s] for s in sets), [])],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    containers = planned(proc.stdout)
    assert sorted(containers) == ["scheduler", "server 0", "server 1", "worker 0", "worker 1"]
    for label, c in containers.items():
        role = label.split()[0]
        assert c.env["DMLC_ROLE"] == role
        assert c.env["DMLC_PS_ROOT_URI"] in c.hosts
        assert c.env["DMLC_PS_ROOT_PORT"] == "9321"
        assert (c.env["DMLC_NUM_WORKER"], c.env["DMLC_NUM_SERVER"]) == ("2", "2")
        assert c.env["SYNCLINE_JOB_TOKEN"] == "t0k"
        assert c.env["SYNCLINE_HOST"] == "127.0.0.1"
    assert [containers[f"worker {i}"].env["DMLC_WORKER_ID"] for i in range(2)] == ["0", "1"]
    assert containers["scheduler"].entrypoint == "syncline-scheduler"
    assert containers["server 1"].entrypoint == "syncline-server"


def test_the_runner_plays_pods_of_several_workers():
    helm = rr.find_helm()
    if not helm or not CHART.is_dir():
        pytest.skip("no helm or no chart at deploy/helm/syncline: run scripts/setup-deploy-tools")
    sets = ["numServers=1", "numWorkers=4", "worker.processesPerPod=2", "jobToken=t0k", "scheduler.port=9321"]
    proc = subprocess.run([helm, "template", "r", str(CHART), *sum((["--set", s] for s in sets), [])],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    containers = planned(proc.stdout)
    assert sorted(containers) == ["scheduler", "server 0", "worker 0", "worker 1"]  # two pods of two workers
    for i in range(2):
        w = containers[f"worker {i}"]
        assert w.entrypoint == "pslaunch"
        assert w.args[:w.args.index("--")] == [
            "--role", "worker", "--scheduler", "r-syncline-scheduler:9321", "--workers", "4", "--servers", "1",
            "--local-workers", "2", "--node-rank", str(i)]
        assert "DMLC_WORKER_ID" not in w.env
