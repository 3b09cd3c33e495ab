"""Embeddings, session Transformer, retrieval, ranking, baselines and the model store
(docs/architecture.md).
"""
