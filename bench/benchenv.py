"""What the Python benchmark drivers (bench/transport/run.py, bench/cluster) share about the
processes they start: a clean environment for Syncline's, and the JSON result lines those print."""
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


def parse_variants(items, base=None):
    """--variant values ("LABEL:NAME=VALUE,...") as {label: settings}, each on top of `base`."""
    variants = {}
    for item in items:
        label, _, settings = item.partition(":")
        variants[label] = dict(base or {}, **dict(kv.split("=", 1) for kv in settings.split(",") if kv))
    return variants
