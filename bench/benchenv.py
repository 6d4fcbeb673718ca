"""What the Python benchmark drivers (bench/transport/run.py, bench/cluster) share about the
processes they start: a clean environment for Syncline's, the JSON result lines those print, and
the machine's CPU counters that say how busy the emulated hosts kept its cores."""
import json
import os


def clean_env(extra=None):
    """This process's environment without Syncline/BytePS settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SYNCLINE_", "DMLC_", "BYTEPS_", "PS_"))}
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


def json_lines(output):
    """The JSON objects printed one per line in `output`, after any prefix (pslaunch adds one)."""
    found = []
    for line in output.splitlines():
        brace = line.find("{")
        if brace >= 0:
            try:
                found.append(json.loads(line[brace:]))
            except ValueError:
                pass
    return found


def machine_cpu_ticks():
    """(busy, total) clock ticks of all cores since boot (/proc/stat's first line), or None where it
    cannot be read. Busy is all but idle and iowait; steal (the hypervisor running others while this
    machine wanted a core) counts as busy, and guest time, already inside user time, once."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    total = sum(fields[:8])  # user, nice, system, idle, iowait, irq, softirq, steal
    return total - fields[3] - fields[4], total


def parse_variants(items, base=None):
    """--variant values ("LABEL:NAME=VALUE,...") as {label: settings}, each on top of `base`."""
    variants = {}
    for item in items:
        label, _, settings = item.partition(":")
        variants[label] = dict(base or {}, **dict(kv.split("=", 1) for kv in settings.split(",") if kv))
    return variants


def stale_package(root, build_dir=None, installed=None):
    """Why the syncline package this Python imports is not this checkout's (a Python file that
    differs from python/syncline, a native file from another build than `build_dir` (default
    $SYNCLINE_BUILD_DIR or root/build, relative to root), or a TensorFlow op compiled before one of
    its sources last changed), or None when it is: the drivers that run the
    installed package measure what it holds, whatever the build beside them says. `installed`:
    the package's directory, found by import machinery where not given."""
    import filecmp
    import importlib.util
    from pathlib import Path

    if installed is None:
        spec = importlib.util.find_spec("syncline")
        if spec is None or not spec.submodule_search_locations:
            return "this Python has no syncline package"
        installed = list(spec.submodule_search_locations)[0]
    installed = Path(installed)
    sources = Path(root) / "python" / "syncline"
    if installed.resolve() == sources.resolve():
        pairs = []
    else:
        pairs = [(s, installed / s.relative_to(sources)) for s in sorted(sources.rglob("*.py"))]
    build = Path(root) / (build_dir or os.environ.get("SYNCLINE_BUILD_DIR") or "build")
    # The package's own copy: clean_env drops SYNCLINE_NATIVE_DIR from the jobs' environment.
    native = installed / "_native"
    names = [n for n in ("lib/libsyncline.so", "bin/pslaunch", "bin/syncline-scheduler", "bin/syncline-server")
             if (build / n).exists()]
    if not names:
        return f"there is no build at {build} to compare its native files with (SYNCLINE_BUILD_DIR names one)"
    pairs += [(build / n, native / n) for n in names]
    for source, copy in pairs:
        if not copy.exists() or not filecmp.cmp(source, copy, shallow=False):
            return f"{copy} is not {source}"
    # The TensorFlow op is compiled at install time (python/setup.py), so there is no copy to compare:
    # it is stale when a source it is compiled from changed after it was.
    op = native / "lib" / "libsyncline_tf_ops.so"
    if op.exists():
        for source in (sources / "tensorflow" / "kernels" / "push_pull_op.cc", Path(root) / "proxy" / "c_api.h"):
            if source.exists() and source.stat().st_mtime > op.stat().st_mtime:
                return f"{op} was compiled before {source} last changed"
    return None


def require_current_package(root, build_dir=None):
    """Ends this driver with the fix when stale_package finds the installed package stale."""
    import sys

    why = stale_package(root, build_dir)
    if why:
        sys.exit(f"the syncline package installed in {sys.prefix} is not this checkout's ({why}): "
                 "run scripts/setup-python --package (SYNCLINE_BUILD_DIR names another build) "
                 "so that what is measured is what is here")
