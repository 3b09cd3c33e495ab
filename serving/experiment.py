"""User-level randomized experiments: every user in one arm, every arm a serving policy.

Policies (what the retrieval and ranking stages do for a user of the arm):

- `popularity`: recent popularity, nudged by the session's categories (the cold-start answer),
  for every user of the arm;
- `frozen`: the pinned model `version`, retrieval order, never updated: the control that says
  what serving would be without online learning. The scorer loads it beside the live versions
  and keeps it while an arm pins it (serving/pinned_versions.py);
- `model`: the live, online-updated version (the canary's candidate for the canary share of
  users), retrieval order;
- `ranker`: the live version, re-ordered by the ranker the gate published (retrieval order
  while none is, or for a major version it was not judged on; a version that carries its own
  ranker re-scores with it).

A learned arm answers a user whose history holds no item its version knows from popularity, as
cold start always did, and the answer still names the user's arm: arms are compared on the
users assigned to them (intention to treat), never on the users a policy happened to serve, so
every arm is measured on the same population. Error answers name the arm too.

Assignment is weighted rendezvous hashing of the user id: for each arm a uniform
u = hash(salt, arm, user) in (0, 1), a score -ln(u) / weight, and the user goes to the arm
with the lowest score (an arm's share is its weight over the sum of weights). Nothing is
random or stored, so a user stays in one arm across scorers and restarts. Changing weights
moves as few users as a stateless assignment can (P-MinHash, Moulton and Jiang 2018): raising
an arm's weight only moves users into it, lowering it only moves users out, and adding or
removing an arm moves only the users it gains or loses; a new salt (or experiment name) draws
everyone afresh. The canary between two versions is an experiment too: two arms (serving,
candidate) salted by the candidate (serving/registry.py `canary_split`).

The arms come from the scorer's settings (`STREAMREC_EXPERIMENT`) or, while present, from a
JSON document at Redis key `<prefix>cfg:{serving}:experiment` that the configuration refresh
re-reads every second, so operators change weights without a restart.
"""

from __future__ import annotations

import hashlib
import math
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.fields import Id
from schemas.model_updates import Version

Policy = Literal["popularity", "frozen", "model", "ranker"]
LEARNED: frozenset[Policy] = frozenset({"frozen", "model", "ranker"})
_HASH_SPACE = float(2**64)
MAX_ARMS = 16


class ExperimentArm(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Id = Field(description="The arm's name, in every response it answers (`arm`).")
    policy: Policy = Field(description="How its users are served (serving/experiment.py).")
    weight: float = Field(1.0, ge=0.0, le=1e6, description="Share of users: this over the "
                          "sum of the arms' weights. 0 assigns nobody.")
    version: Version | None = Field(
        None, description="The model version a `frozen` arm serves (and only that policy).",
    )

    @model_validator(mode="after")
    def _version_iff_frozen(self) -> Self:
        if (self.policy == "frozen") != (self.version is not None):
            raise ValueError("a frozen arm names its version, and only a frozen arm does")
        return self


def _default_arms() -> tuple[ExperimentArm, ...]:
    return (ExperimentArm(name="ranker", policy="ranker"),)


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Id = Field("serving", description="Named in every response (`experiment`).")
    salt: Id | None = Field(
        None, description="What the assignment hashes with the user id; none: the name. A "
        "new salt assigns every user afresh.",
    )
    arms: Annotated[tuple[ExperimentArm, ...], Field(min_length=1, max_length=MAX_ARMS)] = (
        Field(default_factory=_default_arms, description="The arms; by default one, `ranker`, "
              "for everyone (the published ranker while there is one).")
    )

    @model_validator(mode="after")
    def _arms_can_assign(self) -> Self:
        if len({a.name for a in self.arms}) != len(self.arms):
            raise ValueError("arm names must differ")
        if not any(a.weight > 0 for a in self.arms):
            raise ValueError("at least one arm needs a positive weight")
        return self

    @property
    def pinned(self) -> frozenset[str]:
        """The versions its frozen arms serve."""
        return frozenset(a.version for a in self.arms if a.version is not None and a.weight > 0)

    def assign(self, user_id: str) -> ExperimentArm:
        """The user's arm (module docstring)."""
        if len(self.arms) == 1:
            return self.arms[0]  # the validator made its weight positive
        salt = self.salt or self.name
        best, best_score = self.arms[0], math.inf
        for arm in self.arms:
            if arm.weight <= 0:
                continue
            score = -math.log(_uniform(f"{salt}:{arm.name}:{user_id}")) / arm.weight
            if score < best_score:
                best, best_score = arm, score
        return best


def _uniform(text: str) -> float:
    """A stable position in (0, 1) for `text`."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + 0.5) / _HASH_SPACE
