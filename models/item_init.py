"""Spectral initialisation of item embeddings from training co-occurrence.

On small datasets the next-item objective alone learns item-item similarity slowly, while the
user x item matrix already says which items go together. We start the item table from the top
singular vectors of ``X D^-1/2`` (X: binary user x item matrix of *training* events, D: item
degrees), i.e. the eigenvectors of the cosine co-occurrence matrix, scaled by the square root
of their singular values. ``torch.svd_lowrank`` keeps this cheap for large catalogs.
"""

from __future__ import annotations

import numpy as np
import torch

from models.sequences import UserSequences


def spectral_item_vectors(train: UserSequences, dim: int, seed: int = 0) -> torch.Tensor:
    """``[n_items + 1, dim]`` vectors (row 0 = padding = zeros) with unit mean row norm."""
    n_columns = train.n_items + 1
    rows = np.concatenate([np.full(len(s), u) for u, s in enumerate(train.items)])
    cols = np.concatenate(train.items)
    pairs = np.unique(np.stack([rows, cols]), axis=1)
    degree = np.bincount(pairs[1], minlength=n_columns).astype(np.float32)
    values = 1.0 / np.sqrt(np.maximum(degree[pairs[1]], 1.0))
    matrix = torch.sparse_coo_tensor(
        torch.from_numpy(pairs), torch.from_numpy(values.astype(np.float32)),
        (len(train.items), n_columns), check_invariants=True,
    ).coalesce()
    rank = min(dim, min(matrix.shape) - 1)
    torch.manual_seed(seed)
    _, singular, right = torch.svd_lowrank(matrix, q=rank + 8, niter=4)
    vectors = torch.zeros(n_columns, dim)
    vectors[:, :rank] = right[:, :rank] * singular[:rank].sqrt()
    vectors[0] = 0.0
    norms = vectors[1:].norm(dim=1)
    scaled: torch.Tensor = vectors / norms[norms > 0].mean().clamp(min=1e-12)
    return scaled
