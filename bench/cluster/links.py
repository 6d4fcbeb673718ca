"""Link shaping for the emulated cluster: rates as text, and the tc tbf that
holds a link to its rate the way a NIC and a switch port would."""
import re

QUEUE_LATENCY_MS = 2  # tbf queue: this much time at the link rate (>= 256 KiB), a shallow switch-port buffer


def parse_rate(text):
    """'1gbit', '500mbit', '25Gbit', '1000000bit' -> bits per second; 'none'/'0' -> None (unlimited)."""
    if text is None or str(text).lower() in ("", "0", "none", "unlimited"):
        return None
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(bit|bps)?\s*", str(text).lower())
    if not m:
        raise ValueError(f"rate '{text}' is not like 1gbit, 500mbit or 25gbit")
    bits = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
    if m.group(3) == "bps":
        bits *= 8  # tc's convention: bps means bytes per second
    if bits < 8000:
        raise ValueError(f"rate '{text}' is below 8 kbit/s")
    return int(bits)


def format_rate(bits):
    if bits is None:
        return "unlimited"
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits >= scale:
            return f"{bits / scale:g} {unit}"
    return f"{bits} bit/s"


PEAK_FACTOR = 1.01  # the link never sends faster than this x rate, even with a full bucket
PEAK_BUCKET_S = 250e-6  # what may leave at once: 250 us of traffic...
MIN_PEAK_BUCKET = 70000  # ...but at least one GSO packet (64 KiB + headers), which passes whole


def tbf_params(bits, mtu, queue_ms=QUEUE_LATENCY_MS, peak_factor=PEAK_FACTOR):
    """tc tbf arguments for a link of `bits` per second.

    A real NIC never sends faster than its line rate. A plain token bucket
    would let an idle link send a whole burst at memory speed, and make short
    transfers look faster than the link; so a peak bucket of 250 us (at least
    one GSO packet) caps the rate at peak_factor x rate beyond that. (A peak
    bucket of one packet is exact but costs a timer per packet: at 25 Gbit/s
    on 2 cores it halves what the emulated links carry.) The rate bucket
    (burst: 2 ms) lets the link catch up after a late timer, at peak_factor x
    rate: slowly with the default 1.01, so on a busy machine late timers cost
    the link some of its rate (see docs/cluster.md). The queue (limit)
    holds queue_ms at the rate on top of the burst, at least 256 KiB: a shallow
    switch-port buffer.
    """
    peak_bucket = max(MIN_PEAK_BUCKET, int(bits / 8 * PEAK_BUCKET_S))
    burst = max(peak_bucket + mtu, int(bits / 8 * 0.002))
    limit = burst + max(262144, int(bits / 8 * queue_ms / 1000))
    return ["rate", f"{bits}bit", "burst", str(burst), "peakrate", f"{int(bits * peak_factor)}bit",
            "mtu", str(peak_bucket), "limit", str(limit)]
