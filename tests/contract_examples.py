"""One valid instance of every wire record, for round-trip and validation tests."""

from __future__ import annotations

import time

import numpy as np
from pydantic import BaseModel

from schemas import (
    DeadLetter,
    DriftAlert,
    EventContext,
    EventType,
    InteractionEvent,
    KpiReport,
    ModelUpdate,
    RecommendationRequest,
    RecommendationResponse,
    RequestFilters,
    ScoredItem,
    TrainingWindow,
)
from schemas.catalog import CatalogItem
from schemas.ranker_examples import RankerExample, ServedFeatures, encode_vectors
from tests.kpi_buckets import spread


def examples() -> dict[str, BaseModel]:
    now = time.time()
    return {
        "InteractionEvent": InteractionEvent(
            event_id="e-1",
            user_id="u-1",
            session_id="s-1",
            item_id="i-1",
            event_type=EventType.ADD_TO_CART,
            timestamp=now,
            context=EventContext(
                price=9.5, category="c-3", device="ios", source="recommendation", request_id="r-1"
            ),
        ),
        "DeadLetter": DeadLetter(
            original_key=b"u-1",
            original_value=b"\xff\x00not json",
            error_class="MalformedJson",
            error_message="InteractionEvent: <root>: Invalid JSON",
            source_topic="interactions",
            source_partition=2,
            source_offset=41,
            source_timestamp_ms=1_700_000_000_000,
            stage="validate",
            service="stream",
            failed_at=now,
        ),
        "RecommendationRequest": RecommendationRequest(
            request_id="r-1",
            user_id="u-1",
            session_id="s-1",
            k=20,
            exclude_items=["i-9"],
            filters=RequestFilters(include_categories=["c-1"], exclude_categories=["c-2"]),
            device="web",
            sent_at=now,
        ),
        "RecommendationResponse": RecommendationResponse(
            request_id="r-1",
            user_id="u-1",
            status="ok",
            items=[ScoredItem(item_id="i-3", score=0.9), ScoredItem(item_id="i-4", score=-1.5)],
            model_version="3.14",
            feature_freshness_ms=120.0,
            model_freshness_ms=5000.0,
            served_at=now,
            experiment="exp-1",
            arm="model",
        ),
        "ModelUpdate": ModelUpdate(
            model_name="session_transformer",
            version="3.14",
            kind="delta",
            base_version="3.13",
            sha256="3b" * 32,
            metrics={"ndcg@10": 0.21, "hr@10": 0.4},
            window=TrainingWindow(start=now - 60, end=now, events=5000),
            published_at=now,
        ),
        "KpiReport": KpiReport(
            report_id="5f1c0a9e2b7d4c36a8e1f0b2c3d4e5f6",
            model_version="3.14",
            window_start=now - 60,
            window_end=now,
            k=10,
            responses=100,
            hits=30,
            clicks=25,
            conversions=5,
            hit_rate_at_k=0.3,
            ctr=0.25,
            conversion_rate=0.05,
            **spread(100, 30),
        ),
        "DriftAlert": DriftAlert(
            alert_id="a-1",
            detector="adwin.hit_rate",
            metric="hit_rate@10",
            model_version="3.14",
            baseline=0.3,
            current=0.15,
            severity="critical",
            suggested_action="retrain",
            detected_at=now,
            message="hit rate fell by half",
        ),
        "ServedFeatures": ServedFeatures(
            request_id="r-1",
            user_id="u-1",
            served_at=now,
            features_at=now,
            model_version="3.14",
            feature_set="pit-serving-v2",
            n_features=3,
            candidates=["i-3", "i-4"],
            vectors=encode_vectors(np.array([[0.5, -1.0, 2.0], [0.25, 0.0, 1e-8]], np.float32)),
            strategy="retrieval_order",
            shown=["i-3", "i-4"],
        ),
        "RankerExample": RankerExample(
            request_id="r-1",
            user_id="u-1",
            served_at=now - 60,
            features_at=now - 60,
            model_version="3.14",
            ranker_version="3.14",
            feature_set="pit-serving-v2",
            n_features=3,
            candidates=["i-3", "i-4"],
            vectors=encode_vectors(np.array([[0.5, -1.0, 2.0], [0.25, 0.0, 1e-8]], np.float32)),
            grades=[1, 0],
            labelled_at=now,
        ),
        "CatalogItem": CatalogItem(
            item_id="i-3",
            title="Twelve Monkeys (1995)",
            genres=["Drama", "Mystery", "Sci-Fi", "Thriller", "Film-Noir", "Children's"],
            release_year=1995,
            updated_at=now,
        ),
    }
