"""The closed loop end to end, on real Kafka + Redis, with no person in it (issue 7).

The demo's own scenario runs with a short configuration: the first model is pre-trained and
published, every service runs as its own process, ML-100K is replayed live, item preferences
shift, and then the monitor must raise a KPI alert, the trainer must retrain and publish a new
major version on its own, and the hit rate must come back to 90% of its pre-drift level.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.demo import dataset, report, scenario
from deploy.demo.run_state import RunState
from deploy.demo.settings import DemoSettings
from deploy.local.stack import LocalStack

RECOVERY_GOAL = 0.9


def _quiet(_state: RunState) -> None:
    """No dashboard in tests."""


@pytest.mark.e2e
@pytest.mark.alone  # the recovery ratio moves when other tests take the CPU
def test_drift_alert_retrain_and_recovery(stack: LocalStack, tmp_path: Path) -> None:
    # The KPI windows are noisy (~240 responses per 5 s, hit rates 0.15-0.34 from one to the
    # next): 55 s before the drift and 90 s after recovery keep the ratio's own noise below the
    # margin it is judged by (60 s after recovery left runs at 0.90 on a slow host).
    # One policy for everyone, every request at its slot, no minor publications, the retrain
    # 45 s into the new regime: the loop's mechanics on the monitor's KPI in under five minutes.
    # The demo's default (an experiment with user-paced requests) is measured by `make demo`
    # itself (docs/performance.md, "The demo").
    settings = DemoSettings(
        reports_dir=tmp_path, dashboard=False, pretrain_budget_s=20.0, warmup_s=25.0,
        drift_after_s=80.0, recovery_settle_s=30.0, recovery_hold_s=90.0, max_live_s=320.0,
        experiment=False, user_gap_s=None, online_publish_every_s=1e6,
        retrain_after_change_s=45.0, retrain_window_s=60.0,
    )
    run_dir, summary = scenario.run(settings, dataset.load(settings), _quiet)
    report.write(run_dir, summary)  # summary.json + report.html beside the logs, for a failure

    alerts = summary["alerts"]
    assert isinstance(alerts, list)
    kpi_alerts = [a for a in alerts if str(a["detector"]).startswith("kpi.")]
    assert kpi_alerts, f"no KPI alert after the drift: {summary['kpi']}"
    assert any(a["action"] == "retrain" for a in kpi_alerts), kpi_alerts
    versions = summary["versions"]
    assert isinstance(versions, list)
    majors = {int(str(v["version"]).split(".", maxsplit=1)[0]) for v in versions}
    assert summary["retrains"] and max(majors) >= 2, versions
    gate = summary["ranker_gate"]
    assert isinstance(gate, dict) and gate["gate_runs"], f"the ranker gate never ran: {gate}"
    ratio = summary["recovery_ratio"]
    assert isinstance(ratio, float), summary["kpi"]
    assert ratio >= RECOVERY_GOAL, f"hit rate recovered to {ratio:.3f} of its pre-drift level"
    print(f"recovery ratio {ratio:.3f}")
