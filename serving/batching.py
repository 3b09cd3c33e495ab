"""Micro-batch planning: which requests share one model forward pass and one index search.

The Kafka loop hands over up to `batch_size` requests (those queued when it polls);
here they are grouped by the deployment that answers them (serving or canary), so each group
costs one encoder call and one batched ANN search. Requests whose history holds no item the
version knows (unknown users, empty sessions, only brand-new items) go to the cold-start path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from serving.features import UserContext
from serving.model_bundle import History
from serving.registry import Deployment, Routing


@dataclass
class Group:
    deployment: Deployment
    canary: bool
    members: list[int] = field(default_factory=list)
    """Positions of the group's requests in the batch."""
    histories: list[History] = field(default_factory=list)


@dataclass
class BatchPlan:
    groups: list[Group]
    cold: list[int]
    """Positions answered from recent popularity."""

    def route_of(self, position: int) -> Group | None:
        for group in self.groups:
            if position in group.members:
                return group
        return None


def plan_batch(
    contexts: Sequence[UserContext], routing: Routing, history_length: int
) -> BatchPlan:
    groups: dict[tuple[str, bool], Group] = {}
    cold: list[int] = []
    for position, context in enumerate(contexts):
        deployment, canary = routing.route(context.user_id)
        if deployment is None:
            cold.append(position)
            continue
        recent = context.history[-history_length:]
        history = deployment.bundle.indices([(e.item_id, e.ts) for e in recent])
        if not history:
            cold.append(position)
            continue
        group = groups.setdefault(
            (deployment.version, canary), Group(deployment=deployment, canary=canary)
        )
        group.members.append(position)
        group.histories.append(history)
    return BatchPlan(list(groups.values()), cold)
