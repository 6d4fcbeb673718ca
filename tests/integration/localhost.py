"""What every multi-process test and bench here needs to start processes on 127.0.0.1: a free port,
and an environment without the caller's Syncline/BytePS settings. Standard library only (the kill
bench imports it outside pytest)."""
import os
import random
import socket


def free_port():
    """A port of 127.0.0.1 nobody listens on, below the kernel's ephemeral range: a port from that
    range may be taken by an outgoing connection (the job's own) before the test's process binds it."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(100):
        port = random.randrange(10000, max(10001, low))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra):
    """This process's environment without Syncline/BytePS settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SYNCLINE_", "DMLC_", "BYTEPS_", "PS_"))}
    env.update({k: str(v) for k, v in extra.items()})
    return env
