"""The scorer: rec.requests -> retrieval, filtering, ranking, ordering -> rec.responses.

See serving/service.py for the wiring and docs/architecture.md for the design.
"""
