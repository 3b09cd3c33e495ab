"""The scorer's Prometheus metrics (one registry per scorer, so tests can read them)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from schemas.model_updates import ModelUpdate
from schemas.recommendations import RecommendationResponse
from serving.experiment import Experiment
from serving.registry import Routing

LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5)


class ServeMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.latency = Histogram(
            "streamrec_serve_latency_seconds",
            "Request consumed -> response acknowledged by Kafka, inside the scorer.",
            buckets=LATENCY_BUCKETS, registry=r,
        )
        self.requests = Counter(
            "streamrec_serve_requests",
            "Requests by outcome: ok, cold_start, empty, invalid, internal_error.",
            ["outcome"], registry=r,
        )
        self.batch_size = Histogram(
            "streamrec_serve_batch_size", "Requests per micro-batch.",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), registry=r,
        )
        self.model_version = Gauge(
            "streamrec_model_version_info", "1 for each version serving now, by role.",
            ["role", "version"], registry=r,
        )
        self.swaps = Counter("streamrec_serve_model_swaps", "Routing switches.", registry=r)
        self.updates_refused = Counter(
            "streamrec_serve_model_updates_refused",
            "model.updates records refused: the key names another version than the record.",
            registry=r,
        )
        self.loads_rejected = Counter(
            "streamrec_serve_model_loads_rejected",
            "Model versions not loaded, by model and reason: bytes that differ from the "
            "announced digest (IntegrityError), files outside the store or symlinked "
            "(OutsideStore), missing files, a model the scorer cannot serve.",
            ["model", "reason"], registry=r,
        )
        self.ready = Gauge(
            "streamrec_serve_ready",
            "1 once the scorer has read catalog.items and model.updates to their ends, loaded "
            "the versions the log names, and consumes requests.",
            registry=r,
        )
        self.catalog_items = Gauge(
            "streamrec_serve_catalog_items", "Items whose metadata the scorer holds.", registry=r,
        )
        self.new_items = Counter(
            "streamrec_serve_new_items",
            "Items served that the answering version does not know (catalog.items matched to "
            "the user by genre, in the answers' last places).", registry=r,
        )
        self.canary_decisions = Counter(
            "streamrec_serve_canary_decisions", "Canary decisions taken.", ["action"], registry=r
        )
        self.ranker_rollbacks = Counter(
            "streamrec_serve_ranker_arm_rollbacks", "Published rankers rolled back because their "
            "live experiment arm did worse than the model arm (serving/ranker_arm.py).",
            registry=r,
        )
        self.answers = Counter(
            "streamrec_serve_answers",
            "Answers by experiment arm, strategy that served them and status (error answers "
            "too): what each arm's users got.",
            ["experiment", "arm", "strategy", "status"], registry=r,
        )
        self.arm_weight = Gauge(
            "streamrec_serve_experiment_arm_weight",
            "Weight of each arm of the experiment in force, by arm and policy.",
            ["experiment", "arm", "policy"], registry=r,
        )
        self._experiment: Experiment | None = None

    def answered(self, response: RecommendationResponse) -> None:
        self.answers.labels(
            experiment=response.experiment or "", arm=response.arm or "",
            strategy=response.strategy, status=response.status,
        ).inc()

    def experiment_in_force(self, experiment: Experiment) -> None:
        if experiment == self._experiment:
            return
        self._experiment = experiment
        self.arm_weight.clear()
        for arm in experiment.arms:
            self.arm_weight.labels(
                experiment=experiment.name, arm=arm.name, policy=arm.policy
            ).set(arm.weight)

    def load_rejected(self, update: ModelUpdate, error: BaseException) -> None:
        self.loads_rejected.labels(model=update.model_name, reason=type(error).__name__).inc()

    def routing_changed(self, routing: Routing) -> None:
        self.model_version.clear()
        for role, deployment in (("serving", routing.serving), ("canary", routing.canary)):
            if deployment is not None:
                self.model_version.labels(role=role, version=deployment.version).set(1)
        self.swaps.inc()

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        if port:
            start_http_server(port, addr=host, registry=self.registry)
