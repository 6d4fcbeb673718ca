#!/usr/bin/env python3
"""Draws the end-to-end benchmark's step times as grouped bars (SVG), one group per model and
regime, each bar labelled with its ratio to the framework's own data-parallel training (DDP for
torch, MultiWorkerMirroredStrategy for TensorFlow):

  bench/torch/bars_svg.py --out docs/torch-bench.svg "loopback=loop.json" "1 Gbit/s cluster=cluster.json"

Each JSON file is the `summary (JSON):` line that bench/torch/run.py prints last (the text after
the colon).
"""
import argparse
import json
from html import escape

COLORS = {"compute-only": "#bdbdbd", "DDP": "#3182bd", "MWMS": "#3182bd", "Syncline": "#fd8d3c", "Syncline, server hosts": "#fd8d3c",
          "Syncline, colocated": "#fdd0a2"}
VARIANT_COLORS = {"#fd8d3c": "#a63603", "#fdd0a2": "#e6550d"}  # a labelled variant: a darker shade


def color(config):
    base = config.split(" (")[0]
    c = COLORS.get(base, "#999")
    return VARIANT_COLORS.get(c, c) if config != base else c


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("inputs", nargs="+", help="TITLE=summary.json")
    a = p.parse_args()
    groups = []
    for item in a.inputs:
        title, path = item.split("=", 1)
        for row in json.load(open(path)):
            groups.append((f"{title}: {row['model']}", row["median"]))
            baseline = row.get("baseline", "DDP")
    bar_w, gap, left, top, height = 26, 34, 60, 40, 260
    configs = list(dict.fromkeys(c for _, med in groups for c in med))
    # At least as wide as the title line.
    width = max(620, left + sum(len(med) * bar_w + gap for _, med in groups) + 20)
    legend_h = 22 * len(configs)
    what = {"DDP": "PyTorch DDP (gloo)", "MWMS": "TensorFlow's MultiWorkerMirroredStrategy"}.get(baseline, baseline)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + height + 70 + legend_h}" '
           'font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="20" font-size="13">Step time relative to {what}, same model, '
           'batch and machine; lower is better</text>']
    peak = max(ms / med[baseline] for _, med in groups for ms in med.values())
    base = top + height
    for frac in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0):
        if frac <= peak * 1.05:
            y = base - height * frac / (peak * 1.1)
            out.append(f'<line x1="{left - 4}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
            out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{frac:.1f}x</text>')
    x = left
    for name, med in groups:
        for config, ms in med.items():
            ratio = ms / med[baseline]
            h = height * ratio / (peak * 1.1)
            out.append(f'<rect x="{x}" y="{base - h:.1f}" width="{bar_w - 4}" height="{h:.1f}" '
                       f'fill="{color(config)}"><title>{escape(config)}: {ms:.0f} ms</title></rect>')
            out.append(f'<text x="{x + (bar_w - 4) / 2}" y="{base - h - 3:.1f}" text-anchor="middle" '
                       f'font-size="9">{ratio:.2f}</text>')
            x += bar_w
        out.append(f'<text x="{x - len(med) * bar_w / 2 - 2}" y="{base + 16}" text-anchor="middle">'
                   f'{escape(name)}</text>')
        x += gap
    out.append(f'<line x1="{left - 4}" x2="{width - 10}" y1="{base}" y2="{base}" stroke="#333"/>')
    for i, config in enumerate(configs):
        y = base + 36 + 22 * i
        out.append(f'<rect x="{left}" y="{y}" width="14" height="14" fill="{color(config)}"/>')
        out.append(f'<text x="{left + 20}" y="{y + 11}">{escape(config)}</text>')
    out.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
