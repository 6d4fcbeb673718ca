#!/usr/bin/env python3
"""Runs the Jobs of a rendered Helm chart as Docker containers on this host.

The last rung of the chart's validation ladder: the pods that `helm template`
renders for a job run for real, from the image, with the environment
Kubernetes would give them, and every one of them must exit 0.

    run_rendered.py MANIFESTS.yaml            # the output of `helm template` ('-': stdin)
    run_rendered.py --chart deploy/helm/syncline -f values.yaml [--set K=V ...]

With --chart the runner renders the chart itself, with helm (--helm, default:
SYNCLINE_HELM, the one beside this Python (scripts/setup-deploy-tools),
then PATH's), and sets scheduler.port
to a port that is free here unless a --set names it.

Every container runs with `--network host`: all pods share this host's
loopback, so each pod IP is 127.0.0.1 and every Service name (and every
<pod>.<subdomain> of an Indexed Job) resolves to 127.0.0.1 through
--add-host. What Kubernetes would give a pod is mapped as follows:

- the Job's pods: `completions` containers (all at once), named
  <prefix>-<job>-<index> (Indexed Jobs) or <prefix>-<job> (completions 1);
- command/args: ENTRYPOINT/CMD as Kubernetes defines them, with $(VAR)
  references expanded; workingDir; securityContext runAsUser/runAsGroup;
- env: literal values (with $(VAR) expansion); fieldRef status.podIP and
  status.hostIP -> 127.0.0.1, metadata.name -> <job>-<index>,
  metadata.namespace -> --namespace, spec.nodeName -> the host name, the pod's
  labels and annotations (batch.kubernetes.io/job-completion-index included);
  secretKeyRef and configMapKeyRef from the rendered Secrets and ConfigMaps;
  Indexed Jobs also get JOB_COMPLETION_INDEX, as Kubernetes sets it;
- a Service port must equal its target port (no port mapping on one host).

Then it waits (--timeout) for every container to exit, prints each one's
output with a role/index prefix ("[worker 1] ...") and its exit status,
removes the containers and exits 0 only when every container exited 0
(1 otherwise, 124 when the deadline passed first, 2 on a usage error or
something it cannot map).
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rendered_pods import POD_IP, RunnerError, load_manifests, plan  # noqa: E402  (the module beside this script)

# ---- running (docker) ----------------------------------------------------------------------------


def docker_client():
    """Debian's docker client when installed (same release as its daemon), else PATH's."""
    return "/usr/bin/docker" if os.access("/usr/bin/docker", os.X_OK) else (shutil.which("docker") or "docker")


class Runner:
    def __init__(self, docker, envdir, run_id):
        self.docker, self.envdir, self.run_id = docker, envdir, run_id
        self.started = []

    def _docker(self, *args, check=True, timeout=120):
        proc = subprocess.run([self.docker, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise RunnerError(f"docker {args[0]} failed: {proc.stderr.strip()}")
        return proc

    def start(self, c):
        # The environment goes through a file (mode 0600), not the command line: it holds the token.
        env_file = os.path.join(self.envdir, c.name + ".env")
        with open(os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            for k, v in c.env.items():
                if "\n" in v:
                    raise RunnerError(f"{c.name}: env {k} holds a newline, which docker's env file cannot carry")
                f.write(f"{k}={v}\n")
        args = ["run", "-d", "--network", "host", "--pull", "never", "--name", c.name,
                "--label", f"org.syncline.run-rendered={self.run_id}", "--env-file", env_file]
        for h in c.hosts:
            args += ["--add-host", f"{h}:{POD_IP}"]
        if c.workdir:
            args += ["--workdir", c.workdir]
        if c.user:
            args += ["--user", c.user]
        if c.entrypoint:
            args += ["--entrypoint", c.entrypoint]
        args.append(c.image)
        args += c.args or []
        self.started.append(c)
        self._docker(*args)

    def states(self):
        """{name: (running, exit code)} of the started containers."""
        # A container that is gone (removed from outside) counts as exited with -1.
        out = {c.name: (False, -1) for c in self.started}
        p = self._docker("inspect", "-f", "{{.Name}} {{.State.Running}} {{.State.ExitCode}}",
                         *[c.name for c in self.started], check=False)
        for line in p.stdout.splitlines():
            name, running, code = line.split()
            out[name.lstrip("/")] = (running == "true", int(code))
        return out

    def logs(self, c):
        p = subprocess.run([self.docker, "logs", c.name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace", timeout=60)
        return p.stdout

    def stop(self, names, grace=5):
        if names:
            self._docker("stop", "-t", str(grace), *names, check=False, timeout=grace + 60)

    def remove(self):
        names = [c.name for c in self.started]
        if names:
            self._docker("rm", "-f", *names, check=False, timeout=120)


def run(containers, docker, timeout, out=sys.stdout):
    """Starts the containers, waits for them, prints their output and status; returns the exit code."""
    run_id = uuid.uuid4().hex[:12]
    with tempfile.TemporaryDirectory(prefix="run-rendered-") as envdir:
        runner = Runner(docker, envdir, run_id)
        stopped = []

        def on_signal(signum, frame):
            raise KeyboardInterrupt(signal.Signals(signum).name)
        previous = signal.signal(signal.SIGTERM, on_signal)
        try:
            for c in containers:
                runner.start(c)
            print(f"run_rendered: started {len(containers)} containers: "
                  + ", ".join(f"{c.name} ({c.label})" for c in containers), file=out, flush=True)
            deadline = time.monotonic() + timeout
            while True:
                states = runner.states()
                if not any(running for running, _ in states.values()):
                    break
                if time.monotonic() >= deadline:
                    stopped = [n for n, (running, _) in states.items() if running]
                    print(f"run_rendered: the deadline of {timeout:g} s passed; stopping " + ", ".join(stopped),
                          file=out, flush=True)
                    runner.stop(stopped)
                    states = runner.states()
                    break
                time.sleep(0.5)
            for c in containers:
                for line in runner.logs(c).splitlines():
                    print(f"[{c.label}] {line}", file=out)
            failed = False
            for c in containers:
                _, code = states[c.name]
                note = " (stopped at the deadline)" if c.name in stopped else ""
                print(f"run_rendered: {c.label} ({c.name}) exited with status {code}{note}", file=out)
                failed |= code != 0
            out.flush()
            return 124 if stopped else (1 if failed else 0)
        finally:
            signal.signal(signal.SIGTERM, previous)
            runner.remove()


# ---- command line --------------------------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_helm(explicit=None):
    """--helm, SYNCLINE_HELM, the helm beside this Python (scripts/setup-deploy-tools), PATH's."""
    for candidate in (explicit, os.environ.get("SYNCLINE_HELM"), os.path.join(os.path.dirname(sys.executable), "helm"),
                      shutil.which("helm")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def render(args):
    helm = find_helm(args.helm)
    if not helm:
        raise RunnerError("no helm found: give --helm, or run scripts/setup-deploy-tools")
    sets = list(args.set or [])
    if not any(s.startswith("scheduler.port=") for s in sets):
        sets.append(f"scheduler.port={free_port()}")
    cmd = [helm, "template", args.release, args.chart, "--namespace", args.namespace]
    for f in args.values or []:
        cmd += ["-f", f]
    for s in sets:
        cmd += ["--set", s]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if proc.returncode != 0:
        raise RunnerError(f"helm template failed: {proc.stderr.strip()}")
    return proc.stdout


def main(argv=None):
    p = argparse.ArgumentParser(description="Runs the Jobs of rendered Kubernetes manifests as docker containers "
                                            "(host network) and checks that every one exits 0.")
    p.add_argument("manifests", nargs="?", help="output of `helm template` ('-': stdin); or use --chart")
    p.add_argument("--chart", help="render this chart with helm template instead")
    p.add_argument("-f", "--values", action="append", help="values file for --chart (repeatable)")
    p.add_argument("--set", action="append", help="K=V for --chart (repeatable); scheduler.port defaults to a free port")
    p.add_argument("--release", default="e2e", help="release name for --chart (default: e2e)")
    p.add_argument("--helm", help="helm binary (default: SYNCLINE_HELM, beside this Python, then PATH)")
    p.add_argument("--namespace", default="default")
    p.add_argument("--image", help="run this image instead of the pods' image")
    p.add_argument("--token", help="job token in place of the rendered Secrets' token")
    p.add_argument("--timeout", type=float, default=300, help="seconds for every container to exit (default: 300)")
    p.add_argument("--prefix", default="", help="container name prefix (default: run-<random>)")
    p.add_argument("--docker", default=None, help="docker client (default: /usr/bin/docker, else PATH)")
    p.add_argument("--dry-run", action="store_true", help="print the containers and their environment, start nothing")
    args = p.parse_args(argv)
    if bool(args.manifests) == bool(args.chart):
        p.error("give either MANIFESTS or --chart")
    try:
        if args.chart:
            text = render(args)
        elif args.manifests == "-":
            text = sys.stdin.read()
        else:
            with open(args.manifests) as f:
                text = f.read()
        prefix = args.prefix or f"run-{uuid.uuid4().hex[:6]}"
        containers = plan(load_manifests(text), prefix, args.namespace, args.token, args.image)
        if args.dry_run:
            for c in containers:
                print(f"{c.name} [{c.label}] {c.image} entrypoint={c.entrypoint} args={c.args}")
                for k, v in c.env.items():
                    print(f"    {k}={'<secret>' if 'TOKEN' in k else v}")
            return 0
        return run(containers, args.docker or docker_client(), args.timeout)
    except RunnerError as e:
        print(f"run_rendered: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print(f"run_rendered: interrupted ({e or 'SIGINT'}); the containers were removed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
