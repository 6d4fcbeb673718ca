"""What every multi-process test and bench here needs to start processes on 127.0.0.1: a free port,
and an environment without the caller's Syncline/BytePS settings. Standard library only (the kill
bench imports it outside pytest)."""
import os
import socket


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra):
    """This process's environment without Syncline/BytePS settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SYNCLINE_", "DMLC_", "BYTEPS_", "PS_"))}
    env.update({k: str(v) for k, v in extra.items()})
    return env
