"""When a replayed dataset's requests leave: at a fixed rate, or paced per user.

A recorded dataset replayed at tens of events per second compresses months into minutes, and a
user's burst with it: ML-100K users rate dozens of films in consecutive rows, half of them within
the same second. At 80 events/s such a user's next request leaves 12 ms after the previous one,
long before the previous event (published `lead_s` after its request) reaches the feature store,
so the request is answered from a history without the user's newest dozens of events. A
sequence model recommends for where the user was then, popularity does not care, and the
comparison measures the replay's speed, not the models.

The user-paced schedule keeps each user's own pace behind the pipeline instead: a user's request
leaves at its slot, but never before `user_gap_s` after the user's previous event was published.
Other users' events go on meanwhile, so a held burst is overtaken by later users' events: each
user's order is kept, the global order only between users.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def request_times(
    users: Sequence[str], start: float, rate: float, lead_s: float, user_gap_s: float | None
) -> FloatArray:
    """Each event's request time (its event leaves `lead_s` later), in the dataset's order:
    slot i at `start + i / rate`, held back per user when `user_gap_s` is set."""
    slots = start + np.arange(len(users), dtype=np.float64) / rate
    if user_gap_s is None:
        return slots
    published: dict[str, float] = {}
    for i, user in enumerate(users):
        slots[i] = max(slots[i], published.get(user, -np.inf) + user_gap_s)
        published[user] = slots[i] + lead_s
    return slots
