"""What every multi-process test and bench here needs to start processes on 127.0.0.1: a free port,
and an environment without the caller's Syncline/BytePS settings. Standard library only (the kill
bench imports it outside pytest)."""
import os
import random
import socket


def free_port(count=1):
    """A port of 127.0.0.1 nobody listens on, and the `count` - 1 after it, below the kernel's
    ephemeral range: a port from that range may be taken by an outgoing connection (the job's own)
    before the test's process binds it."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(100):
        base = random.randrange(10000, max(10001, low - count))
        socks = []
        try:
            for port in range(base, base + count):
                socks.append(socket.socket())
                socks[-1].bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {count} free consecutive ports below {low}")


def clean_env(**extra):
    """This process's environment without Syncline/BytePS settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SYNCLINE_", "DMLC_", "BYTEPS_", "PS_"))}
    env.update({k: str(v) for k, v in extra.items()})
    return env
