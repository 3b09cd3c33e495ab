from serving.batching import plan_batch
from serving.registry import Routing
from tests.unit.serving.fakes import context, deployment


def test_requests_are_grouped_per_deployment_and_cold_ones_set_apart() -> None:
    routing = Routing(deployment("1.0"), deployment("1.1"), canary_share=0.5)
    contexts = [context(f"u{i}", ["i1", "i2"]) for i in range(40)]
    contexts.append(context("new-user"))
    contexts.append(context("only-new-items", ["brand-new"]))
    plan = plan_batch(contexts, routing, history_length=50)
    assert sorted(plan.cold) == [40, 41]
    assert {(g.deployment.version, g.canary) for g in plan.groups} == {("1.0", False),
                                                                       ("1.1", True)}
    members = sorted(p for g in plan.groups for p in g.members)
    assert members == list(range(40))
    for group in plan.groups:
        for position in group.members:
            assert routing.route(contexts[position].user_id)[0] is group.deployment


def test_histories_are_item_indices_of_known_items_cut_to_the_newest() -> None:
    routing = Routing(deployment("1.0"))
    plan = plan_batch([context("u", ["i1", "unknown", "i2", "i3"])], routing, history_length=3)
    (group,) = plan.groups
    assert [i for i, _ in group.histories[0]] == [2, 3]


def test_without_any_model_every_request_is_cold() -> None:
    plan = plan_batch([context("u", ["i1"])], Routing(), history_length=50)
    assert plan.groups == [] and plan.cold == [0]
