#!/usr/bin/env python3
"""Draws resident memory over time, one line per process, one panel per soak CSV (SVG, no
plotting library):

  bench/soak/rss_svg.py --out docs/soak-memory.svg tcp=/tmp/soak/tcp.csv shm=/tmp/soak/shm.csv

Each CSV is what bench/soak/run.py writes: t_s, rounds, process, rss_mib, anon_mib, shmem_mib.
Panels share the time axis and the memory axis, so the two data planes compare at a glance. Each
process is drawn twice: every 1-second sample, faint, and the median of each 10 s, bold (the
level, without the spikes of a transient buffer).
"""
import argparse
import csv
import statistics
from html import escape

COLORS = {"scheduler": "#7f7f7f", "server 0": "#d62728", "server 1": "#ff7f0e",
          "worker 0": "#1f77b4", "worker 1": "#2ca02c"}
EXTRA = ["#9467bd", "#8c564b", "#17becf", "#bcbd22"]


def load(path):
    """{process: [(t_s, rss_mib), ...]} and the seconds at which training ended (or None)."""
    series, done = {}, None
    with open(path) as f:
        for row in csv.DictReader(f):
            if row["process"] == "#done":  # marker row: the first worker printed "done:"
                done = float(row["t_s"])
                continue
            series.setdefault(row["process"], []).append((float(row["t_s"]), float(row["rss_mib"])))
    return series, done


def medians(pts, width_s=10.0):
    """The median of each `width_s` bin: the level without the one-second spikes."""
    bins = {}
    for t, v in pts:
        bins.setdefault(int(t // width_s), []).append(v)
    return [((k + 0.5) * width_s, statistics.median(v)) for k, v in sorted(bins.items())]


def color(name, order):
    return COLORS.get(name, EXTRA[order % len(EXTRA)])


def nice_step(span, ticks=5):
    raw = span / ticks
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000):
        if step >= raw:
            return step
    return raw


def panel(title, series, done, y0, width, height, tmax, ymax):
    left, right, top, bottom = 60, 120, 24, 34
    x = lambda t: left + (width - left - right) * t / tmax
    y = lambda v: y0 + top + (height - top - bottom) * (1 - v / ymax)
    out = [f'<text x="{left}" y="{y0 + 16}" font-size="13" font-weight="bold">{escape(title)}</text>']
    step = nice_step(ymax)
    v = 0
    while v <= ymax:
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += step
    tstep = nice_step(tmax / 60.0, 10) * 60  # whole minutes
    t = 0
    while t <= tmax:
        out.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{y(0):.1f}" y2="{y(0) + 4:.1f}" stroke="black"/>')
        out.append(f'<text x="{x(t):.1f}" y="{y(0) + 16:.1f}" text-anchor="middle">{t / 60:g}</text>')
        t += tstep
    out.append(f'<line x1="{left}" x2="{width - right}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="black"/>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{y(ymax):.1f}" y2="{y(0):.1f}" stroke="black"/>')
    out.append(f'<text x="{(left + width - right) / 2}" y="{y0 + height - 4}" text-anchor="middle">minutes</text>')
    cy = y0 + top + (height - top - bottom) / 2
    out.append(f'<text x="14" y="{cy}" transform="rotate(-90 14 {cy})" text-anchor="middle">RSS, MiB</text>')
    if done is not None:
        out.append(f'<line x1="{x(done):.1f}" x2="{x(done):.1f}" y1="{y(ymax):.1f}" y2="{y(0):.1f}" '
                   f'stroke="#999" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{x(done) - 4:.1f}" y="{y(ymax) + 12:.1f}" text-anchor="end" fill="#777">'
                   'training done</text>')
    for i, (name, pts) in enumerate(sorted(series.items())):
        c = color(name, i)
        raw = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
        out.append(f'<polyline points="{raw}" fill="none" stroke="{c}" stroke-width="0.8" stroke-opacity="0.35"/>')
        smooth = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in medians(pts))
        out.append(f'<polyline points="{smooth}" fill="none" stroke="{c}" stroke-width="2">'
                   f'<title>{escape(name)}</title></polyline>')
        out.append(f'<text x="{width - right + 8}" y="{y0 + top + 14 * i + 10}" fill="{c}">{escape(name)}</text>')
    return out


def write_svg(path, panels, width=820, height=300):
    """panels: [(title, series, done)]; one shared time and memory scale."""
    tmax = max(t for _, s, _ in panels for pts in s.values() for t, _ in pts) or 1
    ymax = max(v for _, s, _ in panels for pts in s.values() for _, v in pts) * 1.08 or 1
    body = []
    for i, (title, series, done) in enumerate(panels):
        body += panel(title, series, done, i * height, width, height, tmax, ymax)
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height * len(panels)}" '
           f'font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/>'
           + "\n".join(body) + "</svg>\n")
    with open(path, "w") as f:
        f.write(svg)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("inputs", nargs="+", help="TITLE=soak.csv")
    a = p.parse_args()
    panels = []
    for item in a.inputs:
        title, path = item.split("=", 1)
        series, done = load(path)
        panels.append((title, series, done))
    write_svg(a.out, panels)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
