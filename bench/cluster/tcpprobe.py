"""Raw TCP between emulated hosts: the reference that Syncline's figures are set
beside, and the check that a link's rate limit is enforced.

As a program (run inside a host's namespace) it is one node of a probe: it
accepts `--expect` connections on `--listen` and reads each to its end, while
it sends to every `--send-to` peer either `--bytes` or for `--seconds`; then it
prints one JSON line: {"sent": [{"to", "bytes", "start", "end"}],
"received": [{"from", "bytes", "accept", "first", "last"}]} with wall-clock
times (all namespaces share the machine's clock).

As a module it drives such nodes in an EmulatedCluster: transfer() (one
stream of a known size) and exchange() (every worker host sends to and
receives from every server host at once, as a parameter server's traffic).
"""
import argparse
import json
import socket
import sys
import threading
import time
from pathlib import Path

CHUNK = 1 << 20


def _receive(conn, peer, record):
    buf = bytearray(CHUNK)
    total, first, last = 0, None, None
    with conn:
        while True:
            n = conn.recv_into(buf)
            if n == 0:
                break
            now = time.time()
            first = first if first is not None else now
            last = now
            total += n
    record.update({"from": peer, "bytes": total, "first": first, "last": last})


def _send(target, nbytes, seconds, deadline, record):
    host, port = target.rsplit(":", 1)
    while True:
        try:
            conn = socket.create_connection((host, int(port)), timeout=5)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
    conn.settimeout(max(1.0, deadline - time.time()))
    data = memoryview(bytes(CHUNK))
    sent, start = 0, time.time()
    with conn:
        while (nbytes is not None and sent < nbytes) or (seconds is not None and time.time() - start < seconds):
            n = CHUNK if nbytes is None else min(CHUNK, nbytes - sent)
            conn.sendall(data[:n])
            sent += n
        conn.shutdown(socket.SHUT_WR)
        conn.recv(1)  # the receiver closes once it has read everything
    record.update({"to": target, "bytes": sent, "start": start, "end": time.time()})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", help="ADDR:PORT to accept connections on")
    ap.add_argument("--expect", type=int, default=0, help="connections to accept")
    ap.add_argument("--send-to", default="", help="comma-separated ADDR:PORT peers to send to")
    ap.add_argument("--bytes", type=int, help="bytes to send to each peer")
    ap.add_argument("--seconds", type=float, help="send to each peer for this long")
    ap.add_argument("--timeout", type=float, default=60, help="give up after this long")
    a = ap.parse_args(argv)
    deadline = time.time() + a.timeout
    threads, sent, received = [], [], []
    if a.listen:
        host, port = a.listen.rsplit(":", 1)
        srv = socket.create_server((host, int(port)), backlog=64)
        srv.settimeout(a.timeout)

        def accept_all():
            for _ in range(a.expect):
                conn, peer = srv.accept()
                conn.settimeout(max(1.0, deadline - time.time()))
                rec = {"accept": time.time()}
                received.append(rec)
                t = threading.Thread(target=_receive, args=(conn, peer[0], rec), daemon=True)
                t.start()
                threads.append(t)

        acceptor = threading.Thread(target=accept_all, daemon=True)
        acceptor.start()
    for target in filter(None, a.send_to.split(",")):
        rec = {}
        sent.append(rec)
        t = threading.Thread(target=_send, args=(target, a.bytes, a.seconds, deadline, rec), daemon=True)
        t.start()
        threads.append(t)
    if a.listen:
        acceptor.join(max(0.0, deadline - time.time()))
    for t in list(threads):
        t.join(max(0.0, deadline - time.time()))
    ok = all("bytes" in r for r in sent + received) and len(received) == a.expect
    print(json.dumps({"sent": sent, "received": received, "ok": ok}), flush=True)
    return 0 if ok else 1


# ---- driving probe nodes in an EmulatedCluster ----------------------------------------------

PROBE = [sys.executable, str(Path(__file__).resolve())]


def _result(code, output, what):
    for line in reversed(output.splitlines()):
        if line.startswith("{"):
            result = json.loads(line)
            if code == 0 and result["ok"]:
                return result
    raise RuntimeError(f"{what} failed (exit {code}): {output[-2000:]}")


def transfer(cluster, src, dst, nbytes, port=5201, timeout=60):
    """Sends `nbytes` over one TCP connection from host src to host dst; returns the
    seconds from the receiver's accept to its last byte."""
    receiver = cluster.start(dst, [*PROBE, "--listen", f"{cluster.address(dst)}:{port}", "--expect", "1",
                                   "--timeout", timeout], name=f"probe-recv-h{dst}-{port}")
    code, out = cluster.run(src, [*PROBE, "--send-to", f"{cluster.address(dst)}:{port}", "--bytes", nbytes,
                                  "--timeout", timeout], timeout=timeout + 5, name=f"probe-send-h{src}-{port}")
    _result(code, out, "probe sender")
    code, = cluster.wait([receiver], timeout=10)
    rec = _result(code, receiver.output(), "probe receiver")["received"][0]
    if rec["bytes"] != nbytes:
        raise RuntimeError(f"probe receiver got {rec['bytes']} of {nbytes} bytes")
    return rec["last"] - rec["accept"]


def exchange(cluster, workers, servers, seconds, port=5202, timeout=60):
    """Every worker host sends to and receives from every server host at once for
    `seconds` (a parameter server's traffic, raw). Returns {worker host:
    (upload bits/s, download bits/s)}, each the sum over its concurrent streams of
    bytes / (last byte - first byte) seen by the receivers."""
    procs = {}
    for h in workers + servers:
        peers = servers if h in workers else workers
        procs[h] = cluster.start(h, [*PROBE, "--listen", f"{cluster.address(h)}:{port}", "--expect", len(peers),
                                     "--send-to", ",".join(f"{cluster.address(p)}:{port}" for p in peers),
                                     "--seconds", seconds, "--timeout", timeout], name=f"probe-h{h}-{port}")
    codes = cluster.wait(list(procs.values()), timeout=timeout + 5)
    results = {h: _result(c, p.output(), f"probe on host {h}") for (h, p), c in zip(procs.items(), codes)}
    by_addr = {cluster.address(h): h for h in procs}
    rates = {w: [0.0, 0.0] for w in workers}
    for h, res in results.items():
        for rec in res["received"]:
            bits = rec["bytes"] * 8 / max(1e-9, rec["last"] - rec["first"])
            sender = by_addr[rec["from"]]
            if h in rates:
                rates[h][1] += bits
            else:
                rates[sender][0] += bits
    return {w: tuple(r) for w, r in rates.items()}


if __name__ == "__main__":
    sys.exit(main())
