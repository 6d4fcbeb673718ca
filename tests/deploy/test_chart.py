"""The Helm chart deploy/helm/syncline: the first rungs of its validation ladder.

1. `helm lint --strict` for every values profile in the chart's ci/ folder;
2. `helm template` output checked object by object: names and kinds, the environment of each
   role (the BytePS/DMLC names, the worker id from the completion index, the token from the
   Secret), Job counts and policies, Services, gating of the ServiceMonitor, schema rejections;
3. every rendered manifest validated in strict mode against the Kubernetes schemas of several
   versions (kubernetes-validate).

helm and kubernetes-validate come from scripts/setup-deploy-tools (into the Python environment
running these tests); SYNCLINE_HELM may name another helm binary.
"""
import base64
import functools
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml is missing: run scripts/setup-deploy-tools")

CHART = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "helm" / "syncline"
PROFILES = sorted(p.name for p in (CHART / "ci").glob("*.yaml"))
SERVICE_MONITOR_API = "monitoring.coreos.com/v1/ServiceMonitor"
KUBERNETES_VERSIONS = ["1.27.0", "1.32.0", "1.37.0"]
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
ALLOWED_FIELD_REFS = {"status.podIP", "metadata.name", COMPLETION_INDEX}


def find_helm():
    candidates = [os.environ.get("SYNCLINE_HELM"), str(pathlib.Path(sys.executable).parent / "helm"),
                  shutil.which("helm")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    return None


HELM = find_helm()
if HELM is None:
    pytest.skip("no helm binary (not in SYNCLINE_HELM, beside this Python, or on PATH): "
                "run scripts/setup-deploy-tools", allow_module_level=True)


def helm(*args, check=True):
    proc = subprocess.run([HELM, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, f"helm {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@functools.lru_cache(maxsize=None)
def _render(release, args):
    return helm("template", release, str(CHART), "--namespace", "training", *args).stdout


def render(*args, release="r"):
    """Renders the chart; returns its objects (a fresh copy each time)."""
    return [d for d in yaml.safe_load_all(_render(release, tuple(args))) if d]


def profile(name):
    return ("-f", str(CHART / "ci" / name))


def by_kind_name(objects):
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def job(objects, role, fullname="r-syncline"):
    return by_kind_name(objects)[("Job", f"{fullname}-{role}")]


def container(objects, role, fullname="r-syncline"):
    (c,) = job(objects, role, fullname)["spec"]["template"]["spec"]["containers"]
    return c


def env_of(objects, role, fullname="r-syncline"):
    env = container(objects, role, fullname)["env"]
    names = [e["name"] for e in env]
    assert len(names) == len(set(names)), f"duplicate env names for {role}: {names}"
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in env}


ROLES = ["scheduler", "server", "worker"]


# ---- rung 1: helm lint --strict -------------------------------------------------------------

@pytest.mark.parametrize("name", PROFILES)
def test_lint_strict(name):
    proc = helm("lint", "--strict", str(CHART), *profile(name), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout, proc.stdout


def test_the_required_profiles_exist():
    assert {"default-values.yaml", "small-values.yaml", "metrics-values.yaml", "existing-secret-values.yaml",
            "big-values.yaml"} <= set(PROFILES)


# ---- rung 2: the rendered objects -----------------------------------------------------------

def test_default_install_renders_exactly_the_contract_objects():
    names = sorted(by_kind_name(render()))
    assert names == sorted([
        ("Secret", "r-syncline-token"),
        ("Service", "r-syncline-scheduler"),
        ("Service", "r-syncline-servers"),
        ("Service", "r-syncline-workers"),
        ("Job", "r-syncline-scheduler"),
        ("Job", "r-syncline-server"),
        ("Job", "r-syncline-worker"),
    ])


def test_default_environment_of_each_role():
    objects = render()
    secret = {"secretKeyRef": {"name": "r-syncline-token", "key": "token"}}
    common = {
        "DMLC_PS_ROOT_URI": "r-syncline-scheduler",
        "DMLC_PS_ROOT_PORT": "9000",
        "DMLC_NUM_WORKER": "2",
        "DMLC_NUM_SERVER": "1",
        "SYNCLINE_HOST": {"fieldRef": {"fieldPath": "status.podIP"}},
        "SYNCLINE_JOB_TOKEN": secret,
        "SYNCLINE_TRANSPORT": "tcp",
    }
    assert env_of(objects, "scheduler") == {"DMLC_ROLE": "scheduler", **common}
    assert env_of(objects, "server") == {"DMLC_ROLE": "server", **common,
                                         "SYNCLINE_SERVER_RANK": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}}
    assert env_of(objects, "worker") == {"DMLC_ROLE": "worker", **common,
                                         "DMLC_WORKER_ID": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}}


def test_commands_and_image_of_each_role():
    objects = render()
    assert container(objects, "scheduler")["command"] == ["syncline-scheduler"]
    assert container(objects, "server")["command"] == ["syncline-server"]
    worker = container(objects, "worker")
    assert worker["command"] == ["syncline-example-training"]
    assert worker["args"][worker["args"].index("--values") + 1] == "exact"  # every sum checked exactly
    for role in ROLES:
        c = container(objects, role)
        assert c["name"] == role
        assert (c["image"], c["imagePullPolicy"]) == ("syncline:latest", "IfNotPresent")
    ports = container(objects, "scheduler")["ports"]
    assert ports == [{"name": "scheduler", "containerPort": 9000, "protocol": "TCP"}]


@pytest.mark.parametrize("args,servers,workers", [((), 1, 2), (profile("small-values.yaml"), 2, 2),
                                                  (profile("big-values.yaml"), 8, 64),
                                                  (("--set", "numWorkers=5,numServers=3"), 3, 5)])
def test_job_counts_and_policies(args, servers, workers):
    objects = render(*args)
    scheduler, server, worker = (job(objects, r) for r in ROLES)
    assert scheduler["spec"]["completions"] == scheduler["spec"]["parallelism"] == 1
    assert "completionMode" not in scheduler["spec"]
    for j, n in ((server, servers), (worker, workers)):
        assert j["spec"]["completionMode"] == "Indexed"
        assert j["spec"]["completions"] == j["spec"]["parallelism"] == n
    for j in (scheduler, server, worker):
        assert j["spec"]["backoffLimit"] == 0  # one failed pod fails its Job
        pod = j["spec"]["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        assert pod["enableServiceLinks"] is False  # no SYNCLINE_SCHEDULER_PORT=tcp://... injected
        assert pod["automountServiceAccountToken"] is False
    env = env_of(objects, "worker")
    assert (env["DMLC_NUM_WORKER"], env["DMLC_NUM_SERVER"]) == (str(workers), str(servers))
    assert all(env_of(objects, r)["DMLC_NUM_WORKER"] == str(workers) for r in ROLES)


def test_services_select_their_pods_and_headless_ones_give_stable_names():
    objects = render()
    found = by_kind_name(objects)
    scheduler = found[("Service", "r-syncline-scheduler")]["spec"]
    assert scheduler["type"] == "ClusterIP" and "clusterIP" not in scheduler
    assert scheduler["ports"] == [{"name": "scheduler", "port": 9000, "targetPort": "scheduler", "protocol": "TCP"}]
    for role in ROLES:
        labels = job(objects, role)["spec"]["template"]["metadata"]["labels"]
        service = found[("Service", "r-syncline-scheduler" if role == "scheduler" else f"r-syncline-{role}s")]
        selector = service["spec"]["selector"]
        assert selector.items() <= labels.items(), (role, selector, labels)
        others = [r for r in ROLES if r != role]
        for other in others:  # each Service selects its own role only
            other_labels = job(objects, other)["spec"]["template"]["metadata"]["labels"]
            assert not selector.items() <= other_labels.items()
    for role in ("server", "worker"):
        service = found[("Service", f"r-syncline-{role}s")]["spec"]
        assert service["clusterIP"] == "None"
        assert job(objects, role)["spec"]["template"]["spec"]["subdomain"] == f"r-syncline-{role}s"
    assert "subdomain" not in job(objects, "scheduler")["spec"]["template"]["spec"]


def test_scheduler_port_value_reaches_service_container_and_env():
    objects = render("--set", "scheduler.port=12345")
    assert by_kind_name(objects)[("Service", "r-syncline-scheduler")]["spec"]["ports"][0]["port"] == 12345
    assert container(objects, "scheduler")["ports"][0]["containerPort"] == 12345
    assert all(env_of(objects, r)["DMLC_PS_ROOT_PORT"] == "12345" for r in ROLES)


def token_secret(objects):
    secrets = [o for o in objects if o["kind"] == "Secret"]
    assert len(secrets) == 1
    return secrets[0]


def test_generated_token_is_random_and_wired_to_every_role():
    objects = render()
    secret = token_secret(objects)
    token = base64.b64decode(secret["data"]["token"]).decode()
    assert len(token) == 32 and token.isalnum()
    assert secret["type"] == "Opaque"
    again = [d for d in yaml.safe_load_all(helm("template", "r", str(CHART)).stdout) if d]  # not cached
    assert base64.b64decode(token_secret(again)["data"]["token"]).decode() != token  # a new one per install
    for role in ROLES:
        ref = env_of(objects, role)["SYNCLINE_JOB_TOKEN"]["secretKeyRef"]
        assert ref == {"name": secret["metadata"]["name"], "key": "token"}


def test_given_token_is_stored_in_the_secret():
    secret = token_secret(render(*profile("small-values.yaml")))
    assert base64.b64decode(secret["data"]["token"]).decode() == "small-job-token"


def test_existing_secret_renders_no_secret_and_is_referenced():
    objects = render(*profile("existing-secret-values.yaml"))
    assert not [o for o in objects if o["kind"] == "Secret"]
    for role in ROLES:
        assert env_of(objects, role)["SYNCLINE_JOB_TOKEN"] == {
            "secretKeyRef": {"name": "training-token", "key": "job-token"}}


@pytest.mark.parametrize("api", [False, True])
@pytest.mark.parametrize("enabled", [False, True])
def test_service_monitor_needs_both_the_api_and_the_value(api, enabled):
    args = ["--set", "metrics.enabled=true", "--set", f"metrics.serviceMonitor.enabled={str(enabled).lower()}"]
    if api:
        args += ["--api-versions", SERVICE_MONITOR_API]
    monitors = [o for o in render(*args) if o["kind"] == "ServiceMonitor"]
    if not (api and enabled):
        assert monitors == []
        return
    (monitor,) = monitors
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "syncline",
                                                          "app.kubernetes.io/instance": "r"}
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["training"]}


def test_service_monitor_without_metrics_is_refused():
    proc = helm("template", "r", str(CHART), "--set", "metrics.serviceMonitor.enabled=true",
                "--api-versions", SERVICE_MONITOR_API, check=False)
    assert proc.returncode != 0
    assert "metrics.serviceMonitor.enabled needs metrics.enabled" in proc.stderr


def test_metrics_profile_serves_metrics_on_every_role():
    objects = render(*profile("metrics-values.yaml"), "--api-versions", SERVICE_MONITOR_API)
    found = by_kind_name(objects)
    assert found[("ServiceMonitor", "r-syncline")]["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    for role in ROLES:
        assert env_of(objects, role)["SYNCLINE_METRICS_PORT"] == "9400"
        ports = {p["name"]: p["containerPort"] for p in container(objects, role)["ports"]}
        assert ports["metrics"] == 9400
        annotations = job(objects, role)["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/port"] == "9400"
        assert annotations["example.com/team"] == "training"
    for name in ("r-syncline-scheduler", "r-syncline-servers", "r-syncline-workers"):
        ports = {p["name"]: p["port"] for p in found[("Service", name)]["spec"]["ports"]}
        assert ports["metrics"] == 9400


def test_several_workers_per_pod_run_under_pslaunch_with_contiguous_ranks():
    """worker.processesPerPod L: numWorkers / L pods, each `pslaunch --local-workers L --node-rank <index>`."""
    objects = render("--set", "numWorkers=6,numServers=2,worker.processesPerPod=3")
    worker = job(objects, "worker")
    assert worker["spec"]["completions"] == worker["spec"]["parallelism"] == 2
    assert worker["spec"]["completionMode"] == "Indexed"
    c = container(objects, "worker")
    command = c["command"]
    assert command[:3] == ["pslaunch", "--role", "worker"]
    flags = dict(zip(command[3:command.index("--"):2], command[4:command.index("--"):2]))
    assert flags == {"--scheduler": "$(DMLC_PS_ROOT_URI):$(DMLC_PS_ROOT_PORT)", "--workers": "$(DMLC_NUM_WORKER)",
                     "--servers": "$(DMLC_NUM_SERVER)", "--local-workers": "3",
                     "--node-rank": "$(JOB_COMPLETION_INDEX)"}
    # The user's command follows, its arguments as they were.
    assert command[command.index("--") + 1:] == ["syncline-example-training"]
    assert c["args"] == ["--rounds", "50", "--values", "exact"]
    env = env_of(objects, "worker")
    assert "DMLC_WORKER_ID" not in env  # pslaunch gives each worker its rank
    assert env["DMLC_NUM_WORKER"] == "6"  # every worker process counts
    assert env["SYNCLINE_HOST"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    # One per pod stays as it was.
    one = container(render("--set", "numWorkers=6"), "worker")
    assert one["command"] == ["syncline-example-training"]


def test_several_workers_per_pod_each_serve_metrics_on_their_own_port():
    objects = render(*profile("metrics-values.yaml"), "--set", "numWorkers=4,worker.processesPerPod=2",
                     "--api-versions", SERVICE_MONITOR_API)
    command = container(objects, "worker")["command"]
    assert command[command.index("--metrics-port") + 1] == "9400"
    assert "SYNCLINE_METRICS_PORT" not in env_of(objects, "worker")  # pslaunch sets 9400 + local rank
    ports = {p["name"]: p["containerPort"] for p in container(objects, "worker")["ports"]}
    assert ports == {"metrics": 9400, "metrics-1": 9401}
    found = by_kind_name(objects)
    service = {p["name"]: (p["port"], p["targetPort"]) for p in found[("Service", "r-syncline-workers")]["spec"]["ports"]}
    assert service == {"metrics": (9400, "metrics"), "metrics-1": (9401, "metrics-1")}
    servers = {p["name"] for p in found[("Service", "r-syncline-servers")]["spec"]["ports"]}
    assert servers == {"metrics"}
    endpoints = [e["port"] for e in found[("ServiceMonitor", "r-syncline")]["spec"]["endpoints"]]
    assert endpoints == ["metrics", "metrics-1"]
    assert container(objects, "server")["env"] and env_of(objects, "server")["SYNCLINE_METRICS_PORT"] == "9400"


@pytest.mark.parametrize("sets", ["numWorkers=5,worker.processesPerPod=2", "numWorkers=2,worker.processesPerPod=4"])
def test_processes_per_pod_must_divide_the_workers(sets):
    proc = helm("template", "r", str(CHART), "--set", sets, check=False)
    assert proc.returncode != 0, proc.stdout
    assert "worker.processesPerPod" in proc.stderr and "must divide numWorkers" in proc.stderr, proc.stderr


def test_metrics_ports_of_a_pod_of_several_workers_must_fit():
    sets = "numWorkers=4,worker.processesPerPod=2,metrics.enabled=true"
    proc = helm("template", "r", str(CHART), "--set", sets + ",metrics.port=65535", check=False)
    assert proc.returncode != 0, proc.stdout
    assert "is past 65535" in proc.stderr, proc.stderr
    assert helm("template", "r", str(CHART), "--set", sets + ",metrics.port=65534").returncode == 0


def test_metrics_are_off_by_default():
    objects = render()
    for role in ROLES:
        assert "SYNCLINE_METRICS_PORT" not in env_of(objects, role)
        assert "metrics" not in [p["name"] for p in container(objects, role).get("ports", [])]
        assert "annotations" not in job(objects, role)["spec"]["template"]["metadata"]


def test_big_profile_places_each_role():
    objects = render(*profile("big-values.yaml"))
    scheduler, server, worker = (job(objects, r)["spec"]["template"]["spec"] for r in ROLES)
    assert scheduler["nodeSelector"] == {"node-pool": "cpu"}
    assert server["nodeSelector"] == {"node-pool": "cpu-large"}
    assert worker["nodeSelector"] == {"node-pool": "gpu"}
    assert server["tolerations"][0]["value"] == "parameter-server"
    assert worker["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert "tolerations" not in scheduler
    assert server["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    assert "nodeAffinity" in worker["affinity"]
    # With no affinity of their own, servers still prefer distinct nodes.
    assert "podAntiAffinity" in server["affinity"]
    assert container(objects, "server")["resources"]["requests"]["memory"] == "64Gi"
    assert container(objects, "worker")["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container(objects, "worker")["command"] == ["python", "/workspace/train.py"]
    assert container(objects, "worker")["workingDir"] == "/workspace"
    for r in ROLES:
        spec = job(objects, r)["spec"]
        assert (spec["activeDeadlineSeconds"], spec["ttlSecondsAfterFinished"]) == (86400, 3600)
        pod = spec["template"]["spec"]
        assert pod["imagePullSecrets"] == [{"name": "registry-credentials"}]
        assert pod["priorityClassName"] == "training"
        c = container(objects, r)
        assert c["image"] == "registry.example.com/ml/syncline:0.1.0" and c["imagePullPolicy"] == "Always"
        env = env_of(objects, r)
        assert env["SYNCLINE_TRANSPORT"] == "ucx" and env["DMLC_PS_ROOT_PORT"] == "9090"
        assert env["SYNCLINE_STARTUP_TIMEOUT_MS"] == "600000"
    # Role extraEnv goes to that role only, after the common extraEnv.
    names = [e["name"] for e in container(objects, "server")["env"]]
    assert names[-3:] == ["SYNCLINE_STARTUP_TIMEOUT_MS", "UCX_TLS", "SYNCLINE_SERVER_THREADS"]
    assert "SYNCLINE_SERVER_THREADS" not in env_of(objects, "worker")
    assert env_of(objects, "worker")["NCCL_DEBUG"] == "WARN"


def test_default_spreads_servers_and_leaves_other_roles_unconstrained():
    objects = render()
    server = job(objects, "server")["spec"]["template"]["spec"]
    (term,) = server["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    labels = job(objects, "server")["spec"]["template"]["metadata"]["labels"]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= labels.items()
    for r in ("scheduler", "worker"):
        assert "affinity" not in job(objects, r)["spec"]["template"]["spec"]
    assert "affinity" not in job(render("--set", "server.spreadAcrossNodes=false"), "server")["spec"]["template"]["spec"]
    for r in ROLES:
        spec = job(objects, r)["spec"]
        assert "activeDeadlineSeconds" not in spec and "ttlSecondsAfterFinished" not in spec


@pytest.mark.parametrize("release,fullname", [("r", "r-syncline"), ("syncline", "syncline"),
                                              ("my-syncline-run", "my-syncline-run"),
                                              ("a" * 50, "a" * 40)])
def test_object_names_follow_the_release(release, fullname):
    objects = render(release=release)
    names = {o["metadata"]["name"] for o in objects}
    assert {f"{fullname}-scheduler", f"{fullname}-server", f"{fullname}-worker", f"{fullname}-servers",
            f"{fullname}-workers", f"{fullname}-token"} == names
    assert env_of(objects, "worker", fullname)["DMLC_PS_ROOT_URI"] == f"{fullname}-scheduler"


def test_fullname_override():
    objects = render("--set", "fullnameOverride=train7")
    assert ("Job", "train7-worker") in by_kind_name(objects)


@pytest.mark.parametrize("name", PROFILES)
def test_env_uses_only_what_the_container_runner_understands(name):
    """Literal values, fieldRef to the pod IP, name or completion index, and secretKeyRef."""
    for obj in render(*profile(name)):
        if obj["kind"] != "Job":
            continue
        for c in obj["spec"]["template"]["spec"]["containers"]:
            for e in c["env"]:
                if "value" in e:
                    assert isinstance(e["value"], str) and set(e) == {"name", "value"}, e
                    continue
                source = e["valueFrom"]
                assert set(source) <= {"fieldRef", "secretKeyRef"} and len(source) == 1, e
                if "fieldRef" in source:
                    assert source["fieldRef"]["fieldPath"] in ALLOWED_FIELD_REFS, e


def settings_names():
    """Every setting name and alias common/settings.cc reads."""
    import re
    text = (CHART.parents[2] / "common" / "settings.cc").read_text()
    return set(re.findall(r'"((?:SYNCLINE|DMLC|BYTEPS|PS)_[A-Z0-9_]+)"', text))


@pytest.mark.parametrize("name", PROFILES)
def test_every_syncline_and_dmlc_name_is_a_setting(name):
    """An unknown SYNCLINE_* name stops every process; an unknown DMLC_* one is ignored."""
    known = settings_names()
    assert {"DMLC_ROLE", "DMLC_PS_ROOT_URI", "DMLC_WORKER_ID", "SYNCLINE_JOB_TOKEN"} <= known
    for obj in render(*profile(name)):
        if obj["kind"] == "Job":
            for e in obj["spec"]["template"]["spec"]["containers"][0]["env"]:
                if e["name"].startswith(("SYNCLINE_", "DMLC_")):
                    assert e["name"] in known, f"{e['name']} is not read by common/settings.cc"


def test_extra_env_is_appended_for_all_roles():
    objects = render("--set", "extraEnv[0].name=SYNCLINE_LOG_LEVEL,extraEnv[0].value=debug",
                     "--set-string", "worker.extraEnv[0].name=OMP_NUM_THREADS,worker.extraEnv[0].value=2")
    for role in ROLES:
        assert env_of(objects, role)["SYNCLINE_LOG_LEVEL"] == "debug"
    assert env_of(objects, "worker")["OMP_NUM_THREADS"] == "2"
    assert "OMP_NUM_THREADS" not in env_of(objects, "server")


@pytest.mark.parametrize("args,message", [
    (("--set", "numWorkers=0"), "numWorkers"),
    (("--set", "numServers=-1"), "numServers"),
    (("--set", "numWorkrs=3"), "numWorkrs"),
    (("--set", "server.replicas=3"), "replicas"),
    (("--set", "transport=ipc"), "transport"),
    (("--set", "scheduler.port=70000"), "port"),
    (("--set-string", "numWorkers=two"), "numWorkers"),
    (("--set-json", "worker.command=[]"), "command"),
    (("--set", "worker.processesPerPod=0"), "processesPerPod"),
    (("--set", "metrics.serviceMonitor.interval=often"), "interval"),
    (("--set", "extraEnv[0].name=OMP_NUM_THREADS,extraEnv[0].value=2"), "extraEnv"),  # not a string: use --set-string
])
def test_schema_rejects_bad_values(args, message):
    proc = helm("template", "r", str(CHART), *args, check=False)
    assert proc.returncode != 0, proc.stdout
    assert "schema" in proc.stderr and message in proc.stderr, proc.stderr


# ---- rung 3: Kubernetes schemas of several versions ----------------------------------------

@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("name", PROFILES)
def test_manifests_validate_against_kubernetes_schemas(name, version):
    kv = pytest.importorskip("kubernetes_validate",
                             reason="kubernetes-validate is missing: run scripts/setup-deploy-tools")
    from kubernetes_validate.utils import SchemaNotFoundError
    objects = render(*profile(name), "--api-versions", SERVICE_MONITOR_API)
    checked = 0
    for obj in objects:
        try:
            kv.validate(obj, version, strict=True)
            checked += 1
        except SchemaNotFoundError:
            # Only the Prometheus operator's CRD has no schema in Kubernetes itself.
            assert obj["kind"] == "ServiceMonitor", f"no schema for {obj['kind']} {obj['apiVersion']}"
        except kv.ValidationError as e:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} is invalid for Kubernetes {version}: {e.message} "
                        f"at {'.'.join(str(p) for p in e.path)}")
    assert checked >= 6
