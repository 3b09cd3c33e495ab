"""Writes `summary.json` and `report.html` (inline SVG charts) into the run folder."""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from deploy.demo.arms import ARM_BIN_S
from deploy.demo.svg import Band, Point, line_chart


def _series(rows: Sequence[dict[str, Any]], key: str) -> list[Point]:
    return [(float(r["t"]), float(r[key])) for r in rows if r.get(key) is not None]


def _bands(rows: Sequence[dict[str, Any]], arm: str) -> list[Band]:
    key = f"{arm}_ci95"
    return [(float(r["t"]), float(r[key][0]), float(r[key][1])) for r in rows if r.get(key)]


def _markers(summary: dict[str, Any]) -> list[tuple[float, str]]:
    marks: list[tuple[float, str]] = []
    if summary["drift"]["at_s"] is not None:
        marks.append((summary["drift"]["at_s"], "drift"))
    marks += [(a["at_s"], f"alert {a['detector']}") for a in summary["alerts"]]
    # Major versions only: minor publications come every few seconds.
    marks += [(v["at_s"], f"{v['model']} v{v['version']}") for v in summary["versions"]
              if v["at_s"] is not None and v["at_s"] >= 0 and str(v["version"]).endswith(".0")]
    marks += [(p["at_s"], f"frozen arm -> {p['version']}") for p in summary["frozen_pins"]]
    return marks


def _kpi_table(summary: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{escape(name)}</td><td>{_num(k['hit_rate'])}</td><td>{k['responses']}</td></tr>"
        for name, k in summary["kpi"].items()
    )
    return ("<table><tr><th>phase</th><th>window hit rate@10 (monitor KPI, all arms)</th>"
            "<th>attributed responses</th></tr>"
            f"{rows}</table><p>recovery ratio: {_num(summary['recovery_ratio'])} "
            f"(recovered: {summary['recovered']})</p>")


def _arms_section(summary: dict[str, Any]) -> str:
    """The experiment's arms: strict hit rate@10 with 95% intervals over users, for the whole
    run and per phase (empty without an experiment)."""
    if not summary["arms"]:
        return ""
    phases = {"whole run": summary["arms"], **summary["arms_by_phase"]}
    rows = "".join(
        f"<tr><td>{escape(phase)}</td><td>{escape(arm)}</td><td>{f['answers']}</td>"
        f"<td>{_num(f['hit_rate'])}</td><td>[{_num(f['ci95'][0])}, {_num(f['ci95'][1])}]</td></tr>"
        for phase, arms in phases.items()
        for arm, f in arms.items()
    )
    return (
        "<h2>experiment arms</h2><p>users assigned to arms by the scorer (a hash of the user "
        "id); strict hit: the item the user then picked was in the answer's top 10; intervals: "
        "bootstrap over users</p><table><tr><th>phase</th><th>arm</th><th>answers in time</th>"
        f"<th>hit rate@10</th><th>95% interval</th></tr>{rows}</table>"
    )


def _ranker_section(summary: dict[str, Any]) -> str:
    gate = summary["ranker_gate"]
    promoted = "".join(
        f"<tr><td>{escape(p['version'])}</td><td>{_num(p['at_s'])}</td>"
        f"<td>{_num(p['ranker_ndcg10'])}</td><td>{_num(p['retrieval_ndcg10'])}</td>"
        f"<td>{_num(p['gain'])}</td><td>{p['held_back_lists']}</td></tr>"
        for p in gate["promoted"]
    )
    return (
        f"<h2>ranker gate</h2><p>gate runs: {gate['gate_runs']}, refused: {gate['refused']}, "
        f"promoted: {len(gate['promoted'])}; last held-back gain: {_num(gate['last_gain'])}</p>"
        "<table><tr><th>promoted version</th><th>at s</th><th>ranker NDCG@10</th>"
        f"<th>retrieval NDCG@10</th><th>gain</th><th>held-back lists</th></tr>{promoted}</table>"
    )


def _drift_line(summary: dict[str, Any]) -> str:
    drift, dataset = summary["drift"], escape(str(summary["dataset"]))
    if drift["at_s"] is None:
        return f"{dataset} replayed live, no shift injected."
    return (f"{dataset} replayed live; at {drift['at_s']} s {drift['item_share']:.0%} of item ids "
            "were permuted among themselves (users pick other items than the model learned).")


def _num(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, float) else escape(str(value))


def html(summary: dict[str, Any]) -> str:
    timeline, marks = summary["timeline"], _markers(summary)
    charts = [
        line_chart("hit rate@10, all arms (schemas/hits.py)",
                   {"window hit, per KPI window (monitor)": _series(summary["kpi_series"],
                                                                    "hit_rate"),
                    "strict hit, per second (client)": _series(timeline, "client_hit_rate")},
                   marks, "hit rate"),
        *([line_chart(f"strict hit rate@10 per arm, per {ARM_BIN_S:.0f} s (shaded: 95% interval "
                      "over the bin's users)",
                      {arm: _series(summary["arm_series"], arm) for arm in summary["arms"]},
                      marks, "hit rate",
                      {arm: _bands(summary["arm_series"], arm) for arm in summary["arms"]})]
          if summary["arms"] else []),
        line_chart("events/s (live replay)", {"events/s": _series(timeline, "events_per_s")},
                   marks, "events/s"),
        line_chart("request latency (request sent -> response read)",
                   {"p50": _series(timeline, "latency_p50_ms"),
                    "p99": _series(timeline, "latency_p99_ms")}, marks, "ms"),
        line_chart("feature freshness p50 (from responses)",
                   {"p50": _series(timeline, "freshness_p50_ms")}, marks, "ms"),
    ]
    figures = {k: summary[k] for k in ("events", "requests", "responses", "latency_ms",
                                       "feature_freshness_ms", "retrains", "wall_s")}
    return f"""<!doctype html><html><head><meta charset="utf-8">
<title>streamrec demo {escape(summary['run_id'])}</title>
<style>body{{font-family:sans-serif;max-width:800px;margin:2em auto}}
td,th{{padding:2px 10px;text-align:left}}pre{{background:#f5f5f5;padding:8px}}</style></head>
<body><h1>streamrec demo {escape(summary['run_id'])}</h1>
<p>{_drift_line(summary)}</p>
{_kpi_table(summary)}
{_arms_section(summary)}
{_ranker_section(summary)}
{''.join(f'<div>{c}</div>' for c in charts)}
<h2>alerts</h2><pre>{escape(json.dumps(summary['alerts'], indent=1))}</pre>
<h2>versions</h2><pre>{escape(json.dumps(summary['versions'], indent=1))}</pre>
<h2>figures</h2><pre>{escape(json.dumps(figures, indent=1))}</pre>
</body></html>"""


def write(run_dir: Path, summary: dict[str, Any]) -> tuple[Path, Path]:
    json_path, html_path = run_dir / "summary.json", run_dir / "report.html"
    json_path.write_text(json.dumps(summary, indent=2) + "\n")
    html_path.write_text(html(summary))
    return json_path, html_path
