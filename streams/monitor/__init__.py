"""The monitor: joins `rec.responses` with the interactions that follow them, emits KPI windows
on `kpi.metrics` and Prometheus, and feeds the drift detectors (streams.monitor.drift)."""
