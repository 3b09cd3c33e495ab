from typing import Any

from streams.monitor.drift.config import DriftSettings
from streams.monitor.drift.detectors import KpiDrop
from streams.monitor.drift.policy import AlertPolicy

WINDOW_S = 300.0
T0 = 1_750_000_000.0


def drop(started_at: float, detected_at: float, baseline: float = 0.3, current: float = 0.15) -> (
    KpiDrop
):
    return KpiDrop("hit_rate", baseline, current, started_at, detected_at, 400)


def policy(**overrides: Any) -> AlertPolicy:
    return AlertPolicy(DriftSettings(**overrides), WINDOW_S)


def test_a_drop_without_a_new_version_suggests_retrain() -> None:
    p = policy()
    p.observe_version("v1", T0)
    alert = p.on_kpi_drop(drop(T0 + 10_000, T0 + 10_100), "v1")
    assert alert is not None
    assert (alert.suggested_action, alert.severity, alert.model_version) == (
        "retrain", "critical", "v1"
    )
    assert (alert.baseline, alert.current, alert.detector) == (0.3, 0.15, "kpi.hit_rate")


def test_a_drop_soon_after_a_new_version_suggests_rolling_it_back() -> None:
    p = policy(rollback_windows=3)
    p.observe_version("v1", T0)
    p.observe_version("v2", T0 + 10_000)
    alert = p.on_kpi_drop(drop(T0 + 10_000 + 2 * WINDOW_S, T0 + 11_000), "v2")
    assert alert is not None
    assert (alert.suggested_action, alert.model_version) == ("rollback", "v2")


def test_a_drop_long_after_a_deployment_is_not_blamed_on_it() -> None:
    p = policy(rollback_windows=3)
    p.observe_version("v1", T0)
    p.observe_version("v2", T0 + 10_000)
    alert = p.on_kpi_drop(drop(T0 + 10_000 + 10 * WINDOW_S, T0 + 14_000), "v2")
    assert alert is not None
    assert alert.suggested_action == "retrain"


def test_a_drop_after_a_gated_minor_version_is_drift_but_after_a_new_major_a_rollback() -> None:
    p = policy(rollback_windows=3)
    p.observe_version("1.0", T0)
    p.observe_version("1.7", T0 + 10_000)
    alert = p.on_kpi_drop(drop(T0 + 10_000 + WINDOW_S, T0 + 10_500), "1.7")
    assert alert is not None
    assert (alert.suggested_action, alert.model_version) == ("retrain", "1.7")
    p.observe_version("2.0", T0 + 20_000)
    alert = p.on_kpi_drop(drop(T0 + 20_000 + WINDOW_S, T0 + 20_500), "2.0")
    assert alert is not None
    assert (alert.suggested_action, alert.model_version) == ("rollback", "2.0")


def test_with_any_version_blamed_a_minor_version_is_rolled_back_too() -> None:
    p = policy(rollback_windows=3, rollback_blames="any")
    p.observe_version("1.0", T0)
    p.observe_version("1.7", T0 + 10_000)
    alert = p.on_kpi_drop(drop(T0 + 10_000 + WINDOW_S, T0 + 10_500), "1.7")
    assert alert is not None
    assert (alert.suggested_action, alert.model_version) == ("rollback", "1.7")


def test_versions_live_when_monitoring_starts_are_not_deployments() -> None:
    p = policy()
    p.observe_version("v1", T0)
    p.observe_version("canary", T0 + 5)
    alert = p.on_kpi_drop(drop(T0 + 10, T0 + 400), "canary")
    assert alert is not None
    assert alert.suggested_action == "retrain"


def test_a_modest_drop_is_a_warning() -> None:
    alert = policy().on_kpi_drop(drop(T0, T0 + 100, baseline=0.30, current=0.25), "v1")
    assert alert is not None
    assert alert.severity == "warning"


def test_the_same_detector_stays_quiet_during_its_cooldown() -> None:
    p = policy(cooldown_s=1800)
    assert p.on_kpi_drop(drop(T0, T0 + 100), "v1") is not None
    assert p.on_kpi_drop(drop(T0 + 200, T0 + 1000), "v1") is None
    assert p.on_psi("price", 0.5, T0 + 1000) is not None  # other detectors are not muted
    assert p.on_kpi_drop(drop(T0 + 2000, T0 + 2000), "v1") is not None
    assert p.suppressed == 1


def test_psi_severity_follows_its_thresholds() -> None:
    p = policy(cooldown_s=0)
    assert p.on_psi("device", 0.05, T0) is None
    warning = p.on_psi("device", 0.15, T0 + 1)
    critical = p.on_psi("device", 0.40, T0 + 2)
    assert warning is not None and critical is not None
    assert (warning.severity, warning.suggested_action) == ("warning", "none")
    assert (critical.severity, critical.suggested_action) == ("critical", "retrain")


def test_freshness_raises_then_clears_once() -> None:
    p = policy()
    raised = p.on_freshness("model", "raised", 30_000.0, 21_600.0, T0)
    cleared = p.on_freshness("model", "cleared", 100.0, 10_800.0, T0 + 60)
    assert raised is not None and cleared is not None
    assert (raised.suggested_action, raised.severity) == ("retrain", "warning")
    assert (cleared.suggested_action, cleared.severity) == ("none", "info")
    assert p.on_freshness("model", "cleared", 100.0, 10_800.0, T0 + 120) is None


def test_stale_features_do_not_suggest_retraining() -> None:
    alert = policy().on_freshness("feature", "raised", 120.0, 60.0, T0)
    assert alert is not None
    assert alert.suggested_action == "none"


def test_alert_ids_are_deterministic_for_replays() -> None:
    first = policy().on_kpi_drop(drop(T0, T0 + 100), "v1")
    second = policy().on_kpi_drop(drop(T0, T0 + 100), "v1")
    assert first is not None and second is not None
    assert first.alert_id == second.alert_id


def test_a_kpi_alert_dates_the_change_for_the_retrain() -> None:
    alert = policy().on_kpi_drop(drop(T0 + 40, T0 + 100), "v1")
    assert alert is not None
    assert alert.change_started_at == T0 + 40
    psi = policy().on_psi("device", 0.4, T0)
    assert psi is not None and psi.change_started_at is None  # PSI cannot date its change
