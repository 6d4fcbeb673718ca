"""The pods a rendered Helm chart describes, as containers to start on one host.

Pure computation over the multi-document YAML of `helm template` (no docker):
each Job becomes its pods' containers, with the command, working directory,
user and environment Kubernetes would give them, mapped to a single host whose
every pod IP and Service name is 127.0.0.1 (run_rendered.py starts them; its
docstring lists the mapping).
"""
import base64
import re
import socket
import uuid

import yaml

COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
POD_IP = "127.0.0.1"


class RunnerError(Exception):
    """Something in the manifests this runner cannot map onto containers."""


# ---- planning (pure: no docker, unit-tested) --------------------------------------------------


class Container:
    """One container to start: what `docker run` needs, and how to label its output."""

    def __init__(self, name, role, index, image, entrypoint, args, env, workdir=None, user=None, hosts=()):
        self.name, self.role, self.index = name, role, index
        self.image, self.entrypoint, self.args = image, entrypoint, args
        self.env, self.workdir, self.user, self.hosts = env, workdir, user, list(hosts)

    @property
    def label(self):
        return self.role if self.index is None else f"{self.role} {self.index}"

    def __repr__(self):
        return f"Container({self.name!r}, {self.label!r})"


def load_manifests(text):
    """The objects of a multi-document YAML stream (empty documents dropped)."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _by_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def secret_values(docs, token=None):
    """{secret name: {key: value}} from the rendered Secrets (data is base64, stringData plain).
    `token`, when given, replaces every Secret's "token" key."""
    out = {}
    for s in _by_kind(docs, "Secret"):
        values = {k: base64.b64decode(v).decode() for k, v in (s.get("data") or {}).items()}
        values.update(s.get("stringData") or {})
        if token is not None and "token" in values:
            values["token"] = token
        out[s["metadata"]["name"]] = values
    return out


def configmap_values(docs):
    return {c["metadata"]["name"]: dict(c.get("data") or {}) for c in _by_kind(docs, "ConfigMap")}


_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.\-]*)\)")


def expand(text, env):
    """Kubernetes' $(VAR) expansion: a defined VAR is replaced, an undefined reference is kept
    as written, and $$ is a literal $."""
    def sub(m):
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return _VAR_REF.sub(sub, str(text))


def _field(path, pod):
    """The value of a fieldRef for `pod` (dict of name, namespace, labels, annotations)."""
    simple = {
        "metadata.name": pod["name"],
        "metadata.namespace": pod["namespace"],
        "metadata.uid": pod["uid"],
        "spec.nodeName": pod["node"],
        "spec.serviceAccountName": pod["service_account"],
        "status.podIP": POD_IP,
        "status.podIPs": POD_IP,
        "status.hostIP": POD_IP,
        "status.hostIPs": POD_IP,
    }
    if path in simple:
        return simple[path]
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if m:
        values = pod[m.group(1)]
        if m.group(2) not in values:
            raise RunnerError(f"pod {pod['name']}: fieldRef {path}: the pod has no such {m.group(1)[:-1]}")
        return values[m.group(2)]
    raise RunnerError(f"pod {pod['name']}: fieldRef {path} is not supported by this runner")


def resolve_env(env_list, pod, secrets, configmaps):
    """The environment of a container: its `env` list resolved in order, as Kubernetes does."""
    env = {}
    for item in env_list or []:
        name = item["name"]
        if "valueFrom" not in item:
            env[name] = expand(item.get("value", ""), env)
            continue
        source = item["valueFrom"]
        if "fieldRef" in source:
            env[name] = str(_field(source["fieldRef"]["fieldPath"], pod))
        elif "secretKeyRef" in source or "configMapKeyRef" in source:
            kind, ref = ("Secret", source["secretKeyRef"]) if "secretKeyRef" in source else (
                "ConfigMap", source["configMapKeyRef"])
            store = (secrets if kind == "Secret" else configmaps).get(ref["name"])
            if store is None or ref["key"] not in store:
                if ref.get("optional"):
                    continue
                what = "is not in the manifests" if store is None else f"has no key {ref['key']!r}"
                raise RunnerError(f"pod {pod['name']}: env {name}: {kind} {ref['name']!r} {what}")
            env[name] = store[ref["key"]]
        else:
            raise RunnerError(f"pod {pod['name']}: env {name}: {sorted(source)} is not supported by this runner")
    return env


def service_hosts(docs, namespace):
    """Host names that resolve to the pods: every Service (short and qualified names)."""
    hosts = []
    for s in _by_kind(docs, "Service"):
        name = s["metadata"]["name"]
        hosts += [name, f"{name}.{namespace}", f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"]
    return hosts


def _matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_service_ports(docs):
    """Every Service port must be the port its pods listen on: host networking cannot remap."""
    for s in _by_kind(docs, "Service"):
        spec = s.get("spec") or {}
        pods = [j["spec"]["template"] for j in _by_kind(docs, "Job")
                if _matches(spec.get("selector"), (j["spec"]["template"].get("metadata") or {}).get("labels") or {})]
        named = {p["name"]: p["containerPort"] for t in pods for c in t["spec"]["containers"]
                 for p in c.get("ports") or [] if "name" in p}
        for port in spec.get("ports") or []:
            target = port.get("targetPort", port["port"])
            if isinstance(target, str) and not target.isdigit():
                if target not in named:
                    continue  # no pod of this manifest declares it: nothing to compare
                target = named[target]
            if int(target) != int(port["port"]):
                raise RunnerError(f"Service {s['metadata']['name']}: port {port['port']} goes to {target}; "
                                  "with host networking a Service port must equal its target port")


def plan(docs, prefix, namespace="default", token=None, image=None):
    """The containers that play every pod of every Job in `docs`, in the manifests' order."""
    secrets, configmaps = secret_values(docs, token), configmap_values(docs)
    check_service_ports(docs)
    hosts = service_hosts(docs, namespace)
    jobs = _by_kind(docs, "Job")
    if not jobs:
        raise RunnerError("the manifests hold no Job")
    # Each pod of an Indexed Job with a subdomain is <job>-<index>.<subdomain>.
    for job in jobs:
        spec, pod_spec = job["spec"], job["spec"]["template"]["spec"]
        if spec.get("completionMode") == "Indexed" and pod_spec.get("subdomain"):
            for i in range(int(spec.get("completions", 1))):
                base = f"{job['metadata']['name']}-{i}.{pod_spec['subdomain']}"
                hosts += [base, f"{base}.{namespace}.svc", f"{base}.{namespace}.svc.cluster.local"]
    containers = []
    for job in jobs:
        containers += _job_containers(job, prefix, namespace, secrets, configmaps, hosts, image)
    return containers


def _job_containers(job, prefix, namespace, secrets, configmaps, hosts, image_override):
    name, spec = job["metadata"]["name"], job["spec"]
    template = spec["template"]
    meta, pod_spec = template.get("metadata") or {}, template["spec"]
    indexed = spec.get("completionMode") == "Indexed"
    completions = int(spec.get("completions", 1))
    if not indexed and completions != 1:
        raise RunnerError(f"Job {name}: {completions} completions of a non-indexed Job are not supported")
    if int(spec.get("parallelism", completions)) < completions:
        raise RunnerError(f"Job {name}: parallelism below completions: its pods would not all run at once")
    if pod_spec.get("initContainers"):
        raise RunnerError(f"Job {name}: initContainers are not supported by this runner")
    labels = dict(meta.get("labels") or {})
    role = labels.get("app.kubernetes.io/component") or name
    out = []
    for i in range(completions):
        index = i if indexed else None
        pod_name = f"{name}-{i}"
        annotations = dict(meta.get("annotations") or {})
        if indexed:
            annotations[COMPLETION_INDEX_ANNOTATION] = str(i)
        pod = {"name": pod_name, "namespace": namespace, "uid": str(uuid.uuid4()), "node": socket.gethostname(),
               "service_account": pod_spec.get("serviceAccountName", "default"), "labels": labels,
               "annotations": annotations}
        pod_security = pod_spec.get("securityContext") or {}
        containers = pod_spec["containers"]
        for c in containers:
            if c.get("envFrom"):
                raise RunnerError(f"Job {name}: envFrom is not supported by this runner")
            env = {"JOB_COMPLETION_INDEX": str(i)} if indexed else {}
            env.update(resolve_env(c.get("env"), pod, secrets, configmaps))
            command = [expand(a, env) for a in c.get("command") or []]
            args = [expand(a, env) for a in c.get("args") or []]
            security = {**pod_security, **(c.get("securityContext") or {})}
            user = None
            if "runAsUser" in security:
                user = str(security["runAsUser"]) + (f":{security['runAsGroup']}" if "runAsGroup" in security else "")
            cname = f"{prefix}-{pod_name if indexed else name}" + (f"-{c['name']}" if len(containers) > 1 else "")
            out.append(Container(
                name=cname, role=role, index=index, image=image_override or c["image"],
                entrypoint=command[0] if command else None,
                args=command[1:] + args if command else (args or None),
                env=env, workdir=c.get("workingDir"), user=user, hosts=hosts))
    return out
