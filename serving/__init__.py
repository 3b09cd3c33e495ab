"""The scorer: rec.requests -> retrieval, filtering, ranking, ordering -> rec.responses.

See DESIGN.md §6 and serving/service.py for the wiring.
"""
