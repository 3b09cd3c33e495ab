"""`streamrec demo`: the whole closed loop on local Kafka + Redis, replaying ML-100K live (or an
interactions CSV: deploy/demo/dataset.py).

What one run does (deploy/demo/scenario.py):
1. starts Kafka + Redis unless they answer (and stops only what it started), creates the topic
   catalog under a fresh prefix `demo<timestamp>.`; feature keys live under `sr:demo<timestamp>:`
   and are deleted at the end; state, model store, logs and the report go to
   `reports/demo-<timestamp>/` (git-ignored);
2. pre-trains the first model on the first half of the dataset (by time, a small time budget),
   checkpoints it as the trainer's start and publishes it as version 1.0; replays that half
   into `interactions` as past events, so users' histories are in Redis;
3. starts feature worker, online trainer, scorer and monitor as child processes;
4. replays the second half live (wall-clock timestamps, `events_per_s`); for a share of events
   it first asks the scorer for recommendations and publishes the interaction `request_lead_s`
   later, with `context.request_id` when the user picked a recommended item. Users are paced
   (`user_gap_s`): a user's next request waits until the feature store holds their previous
   event. The scorer runs the experiment of deploy/demo/arms.py: each user in one arm of
   `popularity`, `frozen`, `model`, `ranker`;
5. at `drift_after_s` injects the drift: item ids are permuted among themselves
   (`drift_item_share`, all by default), so the items users pick move to other ids at once;
6. the monitor's KPI detector alerts (suggested action: retrain), the trainer replays the
   events since the change once `retrain_after_change_s` of it exist (at most
   `retrain_window_s`), retrains (from scratch by default) and publishes a new major version,
   the scorer hot-swaps it and the run re-pins the `frozen` arm to it; the run ends
   `recovery_settle_s + recovery_hold_s` after that publication (or at `max_live_s`) and writes
   `summary.json` and `report.html`: the KPI before the drift, after it and after recovery, and
   each arm's strict hit rate with its interval over users, per phase and over time.

Settings: deploy/demo/settings.py (STREAMREC_DEMO__*). The dashboard reads the services'
/metrics and the kpi.metrics / alerts.drift / model.updates / rec.responses topics.
"""
