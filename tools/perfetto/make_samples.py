#!/usr/bin/env python3
"""Writes sample Chrome-trace JSON files for check_trace.py to an output dir.

The files have the shape common/timeline.cc (Timeline::Write) produces:
{"displayTimeUnit":"ms","traceEvents":[...]} with, per worker, one
"process_name" event, a "thread_name" + "thread_sort_index" pair per row (rows
listed in name order, as Timeline keeps them in a std::map), then one "X" event
per span; keys sorted, compact separators, like nlohmann::json::dump().
The spans mimic worker/kv_client.cc: each chunk row "<tensor> #<chunk>" gets
back-to-back "queued", "push", "sum" spans every step (end of one == start of
the next), plus a "compute" row with one "forward+backward" span per step.

  good_worker0.json, good_worker1.json  clean traces (two ranks)
  good_zero_dur.json                    a zero-length "queued" span, as
                                        Timeline writes when end <= start
  bad_overlap.json                      a span that partially overlaps the
                                        previous one on the same row
  bad_ts_string.json                    an "X" event whose ts is "abc"
  bad_truncated.json                    a file cut off mid-way (a crashed write)

Usage: make_samples.py OUT_DIR
"""

import json
import sys
from pathlib import Path


def timeline_json(pid, spans):
    """spans: list of (name, category, track, start_us, end_us), like Timeline::Span."""
    tracks = {}
    events = []
    for name, cat, track, start, end in spans:
        tid = tracks.setdefault(track, len(tracks) + 1)
        events.append({"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid,
                       "ts": start, "dur": max(0, end - start)})
    meta = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"worker {pid}"}}]
    for track, tid in sorted(tracks.items()):
        meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": track}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                     "args": {"sort_index": tid}})
    return {"traceEvents": meta + events, "displayTimeUnit": "ms"}


def dump(doc):
    return json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n"


def worker_spans(pid, steps=3, tensors=("fc6.grad", "conv1.grad"), chunks=2):
    spans = []
    t = 1_700_000_000_000 + 37 * pid  # steady-clock-like microseconds
    for step in range(steps):
        spans.append((f"forward+backward", "compute", "compute", t, t + 8000))
        t += 8000
        for ti, tensor in enumerate(tensors):
            for c in range(chunks):
                posted = t + 100 * ti + 10 * c
                sent = posted + 40 + 7 * c
                acked = sent + 300 + 11 * ti
                replied = acked + 250
                track = f"{tensor} #{c}"
                spans.append(("queued", "chunk", track, posted, sent))
                spans.append(("push", "chunk", track, sent, acked))
                spans.append(("sum", "chunk", track, acked, replied))
        t += 2000
    return spans


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for pid in (0, 1):
        (out / f"good_worker{pid}.json").write_text(dump(timeline_json(pid, worker_spans(pid))))

    spans = worker_spans(0, steps=1)
    name, cat, track, start, end = spans[1]  # the first "queued": make it empty
    spans[1] = (name, cat, track, start, start - 5)
    spans[2] = (spans[2][0], cat, track, start, spans[2][4])  # push starts where queued is
    (out / "good_zero_dur.json").write_text(dump(timeline_json(0, spans)))

    spans = worker_spans(0, steps=1)
    name, cat, track, start, end = spans[2]  # a "push": add a span straddling its end
    spans.append(("retry", "chunk", track, end - 100, end + 100))
    (out / "bad_overlap.json").write_text(dump(timeline_json(0, spans)))

    doc = timeline_json(0, worker_spans(0, steps=1))
    next(e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] == "push")["ts"] = "abc"
    (out / "bad_ts_string.json").write_text(dump(doc))

    text = dump(timeline_json(0, worker_spans(0, steps=1)))
    (out / "bad_truncated.json").write_text(text[: len(text) * 2 // 3])
    for p in sorted(out.glob("*.json")):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
