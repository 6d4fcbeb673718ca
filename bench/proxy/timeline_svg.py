#!/usr/bin/env python3
"""Draws one training step of worker traces (Chrome-trace JSON written with SYNCLINE_TRACE) as an
SVG, one panel per trace, for putting FIFO and scheduled side by side:

  bench/proxy/timeline_svg.py --step 1 --out docs/proxy-timeline.svg FIFO=/tmp/t/fifo/worker-0.json \
      scheduled=/tmp/t/scheduled/worker-0.json

Each panel: a compute row (forward light, backward dark), then a row per tensor in forward order
(first layer on top) with its chunks' push (to the server's ack) and sum (until the reply) spans.
The step shown runs from the first compute span of the step to the first of the next one.
"""
import argparse
import json
import sys
from html import escape

COLORS = {"forward": "#9ecae1", "backward": "#3182bd", "queued": "#eeeeee", "push": "#fd8d3c", "sum": "#31a354"}


def load(path):
    events = json.load(open(path))["traceEvents"]
    rows = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    spans = [dict(e, row=rows.get(e["tid"], "?")) for e in events if e.get("ph") == "X"]
    return spans


def steps(spans):
    """Start times of steps: a forward span of the first layer begins each step."""
    compute = sorted((s for s in spans if s["cat"] == "compute"), key=lambda s: s["ts"])
    firsts = [s["ts"] for i, s in enumerate(compute) if s["name"].startswith("forward") and
              (i == 0 or not compute[i - 1]["name"].startswith("forward"))]
    return firsts


def panel(title, spans, step, y0, width, row_h, scale_ms):
    starts = steps(spans)
    if step + 1 >= len(starts):
        sys.exit(f"{title}: the trace holds {len(starts)} steps; --step {step} needs the next one too")
    t0, t1 = starts[step], starts[step + 1]
    shown = [s for s in spans if t0 <= s["ts"] < t1 or (s["ts"] < t0 < s["ts"] + s["dur"])]
    tensors = []
    for s in sorted(shown, key=lambda s: s["ts"]):
        if s["cat"] == "chunk":
            tensor = s["row"].rsplit(" #", 1)[0]
            if tensor not in tensors:
                tensors.append(tensor)
    # Forward order: the order the forward spans name the layers.
    forward = [s["name"][len("forward "):] for s in sorted(shown, key=lambda s: s["ts"]) if s["name"].startswith("forward ")]
    tensors.sort(key=lambda t: forward.index(t[:-5]) if t.endswith(".grad") and t[:-5] in forward else len(forward))
    left = 150
    x = lambda ts: left + max(0, ts - t0) / 1000.0 / scale_ms * (width - left - 10)  # earlier: clipped
    out = [f'<text x="4" y="{y0 + 14}" font-weight="bold">{escape(title)}: step {(t1 - t0) / 1000:.0f} ms</text>']
    y = y0 + 22
    out.append(f'<text x="4" y="{y + row_h - 3}">compute</text>')
    for s in shown:
        if s["cat"] == "compute":
            kind = "forward" if s["name"].startswith("forward") else "backward"
            out.append(f'<rect x="{x(s["ts"]):.1f}" y="{y}" width="{max(0.5, x(s["ts"] + s["dur"]) - x(s["ts"])):.1f}" '
                       f'height="{row_h - 2}" fill="{COLORS[kind]}"><title>{escape(s["name"])}</title></rect>')
    for t in tensors:
        y += row_h
        out.append(f'<text x="4" y="{y + row_h - 3}">{escape(t[:22])}</text>')
        for s in shown:
            if s["cat"] == "chunk" and s["row"].rsplit(" #", 1)[0] == t and s["name"] in ("push", "sum"):
                out.append(f'<rect x="{x(s["ts"]):.1f}" y="{y + 1}" width="{max(0.5, x(s["ts"] + s["dur"]) - x(s["ts"])):.1f}" '
                           f'height="{row_h - 3}" fill="{COLORS[s["name"]]}" fill-opacity="0.6"/>')
    return out, y + row_h + 10, (t1 - t0) / 1000.0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("traces", nargs="+", help="TITLE=PATH")
    p.add_argument("--step", type=int, default=1, help="which recorded step (0 = the first)")
    p.add_argument("--out", required=True)
    p.add_argument("--width", type=int, default=1000)
    a = p.parse_args()
    loaded = [(t.split("=", 1)[0], load(t.split("=", 1)[1])) for t in a.traces]
    # One time scale for every panel: the longest step.
    longest = 0
    for title, spans in loaded:
        s = steps(spans)
        longest = max(longest, (s[a.step + 1] - s[a.step]) / 1000.0)
    body, y = [], 10
    for title, spans in loaded:
        rows, y, _ = panel(title, spans, a.step, y, a.width, 12, longest)
        body += rows
    legend = " ".join(f'<tspan fill="{c}">&#9632;</tspan> {k}' for k, c in COLORS.items() if k != "queued")
    body.append(f'<text x="4" y="{y + 4}">{legend}; time axis shared, {longest:.0f} ms across</text>')
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{a.width}" height="{y + 14}" font-family="sans-serif" '
           f'font-size="10"><rect width="100%" height="100%" fill="white"/>' + "".join(body) + "</svg>\n")
    open(a.out, "w").write(svg)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
