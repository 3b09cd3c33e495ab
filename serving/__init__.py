"""The scorer: rec.requests -> retrieval, filtering, ranking, ordering -> rec.responses (DESIGN.md §6)."""
