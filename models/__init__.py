"""What serves and trains: embeddings, the session Transformer and its training, retrieval, the
logged ranker, point-in-time features and the model store. The offline evaluation lab is
:mod:`models.lab` (docs/architecture.md).
"""
