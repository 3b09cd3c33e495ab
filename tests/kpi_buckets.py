"""KPI report counts split over user buckets, for fixtures that only care about the totals."""

from __future__ import annotations

from schemas.limits import USER_BUCKETS


def spread(responses: int, hits: int) -> dict[str, list[int]]:
    """`bucket_responses` and `bucket_hits` as evenly spread as the totals allow (hits fill
    buckets in the same order as responses, never more than a bucket's responses)."""
    bucket_responses = [responses // USER_BUCKETS + (b < responses % USER_BUCKETS)
                        for b in range(USER_BUCKETS)]
    bucket_hits = [hits // USER_BUCKETS + (b < hits % USER_BUCKETS) for b in range(USER_BUCKETS)]
    return {"bucket_responses": bucket_responses, "bucket_hits": bucket_hits}
