"""Which offsets the model has learned from: the proof that no batch is trained twice or skipped.

The ledger travels inside the offset-tied checkpoint, so after a crash it rolls back together
with the model: batches trained after the last checkpoint are forgotten by both and trained again
exactly once. Ranges are merged, so the ledger stays small however long the stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class OffsetLedger:
    ranges: dict[int, list[list[int]]] = field(default_factory=dict)
    """partition -> sorted, merged [first, last] offset ranges trained."""
    overlaps: int = 0
    """Batches that re-covered an offset already trained (must stay 0)."""
    gaps: int = 0
    """Batches that started past the next expected offset (must stay 0 for one consumer)."""

    def record(self, partition: int, first: int, last: int) -> None:
        spans = self.ranges.setdefault(partition, [])
        if spans:
            expected = spans[-1][1] + 1
            if first < expected:
                self.overlaps += 1
            elif first > expected:
                self.gaps += 1
        if spans and first == spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], last)
        else:
            spans.append([first, last])
            spans.sort()

    def next_offset(self, partition: int) -> int | None:
        spans = self.ranges.get(partition)
        return spans[-1][1] + 1 if spans else None

    def trained_count(self) -> int:
        return sum(last - first + 1 for spans in self.ranges.values() for first, last in spans)

    def to_state(self) -> dict[str, object]:
        return {
            "ranges": {str(p): spans for p, spans in self.ranges.items()},
            "overlaps": self.overlaps,
            "gaps": self.gaps,
        }

    @classmethod
    def from_state(cls, state: dict[str, object]) -> OffsetLedger:
        ranges = state.get("ranges", {})
        assert isinstance(ranges, dict)
        overlaps, gaps = state.get("overlaps", 0), state.get("gaps", 0)
        assert isinstance(overlaps, int) and isinstance(gaps, int)
        return cls(
            {int(p): [list(s) for s in spans] for p, spans in ranges.items()}, overlaps, gaps
        )
