#!/usr/bin/env python3
"""Draws each gradient compression as a point: its step time on the emulated cluster relative to
DDP fp32 (one model of bench/torch/run.py's summary) against its final accuracy on the digits task
(digits_accuracy.py's JSON). Lower left is better: faster, and as accurate.

  bench/compression/tradeoff_svg.py --cluster cluster.json --model mlp25m --accuracy accuracy.json \\
      --out docs/compression-tradeoff.svg
"""
import argparse
import json
from html import escape


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster", required=True, help="bench/torch/run.py --json output")
    p.add_argument("--model", default="mlp25m")
    p.add_argument("--accuracy", required=True, help="digits_accuracy.py --json output")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    row = next(r for r in json.load(open(a.cluster)) if r["model"] == a.model)
    accuracy = json.load(open(a.accuracy))
    points = [(c, ms / row["median"]["DDP"], accuracy[c]) for c, ms in row["median"].items() if c in accuracy]
    left, top, w, h = 70, 40, 520, 300
    xs = [x for _, x, _ in points]
    ys = [y for _, _, y in points]
    x_hi = max(1.05, max(xs) * 1.05)
    y_lo, y_hi = min(ys) - 0.01, max(ys) + 0.005

    def px(x):
        return left + w * x / x_hi

    def py(y):
        return top + h * (y_hi - y) / (y_hi - y_lo)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + w + 220}" height="{top + h + 60}" '
           'font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="20" font-size="13">Step time ({a.model}, 4 workers, 1 Gbit/s cluster) against '
           'digits accuracy (2 workers), per compression</text>',
           f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="none" stroke="#333"/>']
    for i in range(0, int(x_hi * 10) + 1):  # every 0.1 x
        out.append(f'<text x="{px(i / 10):.1f}" y="{top + h + 16}" text-anchor="middle">{i / 10:.1f}x</text>')
    for i in range(int(y_lo * 200) + 1, int(y_hi * 200) + 1):  # every half point
        y = i / 200
        out.append(f'<line x1="{left}" x2="{left + w}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{100 * y:.1f}%</text>')
    out.append(f'<text x="{left + w / 2}" y="{top + h + 36}" text-anchor="middle">step time / DDP fp32 '
               '(lower is faster)</text>')
    for name, x, y in points:
        fill = "#3182bd" if name.startswith("DDP") else "#e6550d"
        out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="5" fill="{fill}"><title>{escape(name)}: '
                   f'{x:.2f} x DDP, {100 * y:.2f}%</title></circle>')
        label = name.replace("Syncline, server hosts", "Syncline").replace("DDP", "DDP", 1)
        out.append(f'<text x="{px(x) + 8:.1f}" y="{py(y) + 4:.1f}">{escape(label)}</text>')
    out.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
