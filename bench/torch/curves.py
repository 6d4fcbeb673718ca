"""Loss curves of the end-to-end benchmark (bench/torch/run.py --curve): how fast each configuration
trains, not only how fast it steps.

A curve is worker 0's [(seconds of training so far, loss of the step)], one point per step. Losses
of one small batch are noisy, so they are compared as a moving average over `window` steps
(WINDOW unless the caller says). The reference configuration's smoothed loss at its last step is
the target; each configuration is reported by the training time and the samples it needed to
reach it, and drawn against both (SVG, two panels).
"""
from html import escape

WINDOW = 10
PALETTE = ["#3182bd", "#fd8d3c", "#a63603", "#31a354", "#756bb1", "#17becf", "#636363", "#e377c2"]


def smooth(curve, window=WINDOW):
    """[(seconds, mean loss of the last `window` steps)] (fewer at the start)."""
    out, total = [], 0.0
    for i, (seconds, loss) in enumerate(curve):
        total += loss
        if i >= window:
            total -= curve[i - window][1]
        out.append((seconds, total / min(i + 1, window)))
    return out


def reached(curve, target, window=WINDOW):
    """(step index, seconds) where the smoothed loss first is at most `target`, or None."""
    for i, (seconds, loss) in enumerate(smooth(curve, window)):
        if loss <= target:
            return i, seconds
    return None


def report(curves, reference, global_batch, accuracy=None, window=WINDOW, target=None):
    """Lines of text: each configuration's final smoothed loss, the time and samples to reach the
    target (the reference's final smoothed loss unless given: a task whose loss goes to zero needs
    one) with the ratio of that time to the reference's, and, where `accuracy` (config -> fraction)
    has one, its held-out accuracy after its last step."""
    accuracy = accuracy or {}
    if target is None:
        target = smooth(curves[reference], window)[-1][1]
        said = f"{reference}'s final loss {target:.4f} (mean of its last {window} steps)"
    else:
        said = f"loss {target:.4f} (mean of {window} steps)"
    ref = reached(curves[reference], target, window)
    if ref is None:
        return [f"  target: {said}, which {reference} did not reach"]
    lines = [f"  target: {said}",
             f"  {'configuration':28s} {'final loss':>10s} {'to target s':>11s} {'samples':>8s} {'x reference':>12s}"
             f" {'accuracy %':>10s}"]
    for config, curve in curves.items():
        final = smooth(curve, window)[-1][1]
        right = f" {100 * accuracy[config]:10.2f}" if config in accuracy else ""
        hit = reached(curve, target, window)
        if hit is None:
            lines.append(f"  {config:28s} {final:10.4f} {'not reached':>11s} {'':8s} {'':12s}{right}")
            continue
        step, seconds = hit
        lines.append(f"  {config:28s} {final:10.4f} {seconds:11.1f} {(step + 1) * global_batch:8d} "
                     f"{seconds / ref[1]:12.2f}{right}")
    return lines


def svg(curves, title, global_batch, width=900, height=360, window=WINDOW):
    """Two panels, smoothed loss against training seconds and against samples, one line each."""
    panel_w, top, bottom, left = (width - 60) // 2, 40, height - 40, 50
    losses = [loss for curve in curves.values() for _, loss in smooth(curve, window)]
    low, high = min(losses), max(losses)
    high = high if high > low else low + 1.0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="12">', f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">{escape(title)}</text>']
    for panel, (label, x_of) in enumerate((("training seconds", lambda i, s: s),
                                           ("samples", lambda i, s: (i + 1) * global_batch))):
        x0 = left + panel * (panel_w + 20)
        x_max = max(x_of(i, s) for curve in curves.values() for i, (s, _) in enumerate(curve)) or 1.0
        parts.append(f'<rect x="{x0}" y="{top}" width="{panel_w - left + 30}" height="{bottom - top}" fill="none" '
                     f'stroke="#999"/>')
        parts.append(f'<text x="{x0 + (panel_w - left) / 2}" y="{height - 12}" text-anchor="middle">{label} '
                     f'(0 to {x_max:.0f})</text>')
        plot_w = panel_w - left + 30
        for n, (config, curve) in enumerate(curves.items()):
            points = " ".join(
                f"{x0 + plot_w * x_of(i, s) / x_max:.1f},{bottom - (bottom - top) * (loss - low) / (high - low):.1f}"
                for i, (s, loss) in enumerate(smooth(curve, window)))
            parts.append(f'<polyline fill="none" stroke="{PALETTE[n % len(PALETTE)]}" stroke-width="1.5" '
                         f'points="{points}"/>')
            if panel == 1:
                parts.append(f'<text x="{x0 + plot_w - 6}" y="{top + 16 + 14 * n}" text-anchor="end" '
                             f'fill="{PALETTE[n % len(PALETTE)]}">{escape(config)}</text>')
        parts.append(f'<text x="{x0 - 4}" y="{top + 4}" text-anchor="end">{high:.2f}</text>')
        parts.append(f'<text x="{x0 - 4}" y="{bottom}" text-anchor="end">{low:.2f}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
