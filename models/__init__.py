"""Embeddings, session Transformer, retrieval, ranking, baselines and the model store
(DESIGN.md §4).
"""
