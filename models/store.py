"""Versioned model store: safetensors checkpoints plus a JSON manifest per version.

Layout under ``root``::

    <name>/<major>.<minor>/weights.safetensors
    <name>/<major>.<minor>/manifest.json

A **full** checkpoint holds every tensor. A **delta** holds, for the tensors named in
``row_tensors``, only the changed rows (``<tensor>.rows`` int64 indices and ``<tensor>.values``)
and every other tensor in full (dense weights are small); it names its ``parent`` version.
Loading a delta loads the parent chain first, then scatters the rows (growing a tensor when a
delta added rows). Full retrains bump the major version, incremental updates the minor one.

Every version has a **digest**: the sha256 of its weights file followed by its manifest file.
Announcements carry it and every load checks it before it uses a byte (``load(name, version,
sha256)``: there is no unchecked load); a delta's manifest records its parent's digest, so one
checked digest vouches for the whole chain, as in a hash chain. A version is read only from a
real folder of the store holding real files: a symlink or a path that resolves outside the
store is refused (:class:`OutsideStore`), whatever its bytes.

Whatever else sits in a model's folder (staging folders of an interrupted write, empty or partial
version folders, symlinks, stray files) is never taken for a version (``versions``), and never
blocks a write: a new version is numbered past every name that looks like one
(``next_version``).

API: ``ModelStore(root)``; ``save_full(name, tensors, manifest)``;
``save_delta(name, parent, changed_rows, dense, manifest)``; ``load(name, version, sha256)`` ->
``(tensors, manifest)``; ``digest(name, version)``; ``versions(name)``; ``latest(name)``;
``next_version(name, major=...)``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field
from safetensors.torch import load as load_bytes
from safetensors.torch import save_file

from schemas.model_updates import MODEL_NAME_RE, VERSION_RE, version_key

log = logging.getLogger(__name__)
WEIGHTS = "weights.safetensors"
MANIFEST = "manifest.json"
ROWS, VALUES = ".rows", ".values"


class IntegrityError(ValueError):
    """A stored version's bytes are not the ones its announcement or child vouched for."""


class OutsideStore(IntegrityError):
    """A version's folder or files are symlinks, or resolve outside the store."""


class Version(BaseModel):
    """``major.minor``: major = full retrain lineage, minor = incremental update."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    major: int = Field(ge=0)
    minor: int = Field(ge=0)

    @classmethod
    def parse(cls, text: str) -> Version:
        major, minor = version_key(text)
        return cls(major=major, minor=minor)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def key(self) -> tuple[int, int]:
        return (self.major, self.minor)


class Manifest(BaseModel):
    """Everything needed to trust and reuse a checkpoint besides its tensors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: str = Field(pattern=r"^\d+\.\d+$")
    kind: Literal["full", "delta"]
    parent: str | None = None
    created_at: float = Field(default_factory=time.time)
    metrics: dict[str, float] = Field(default_factory=dict)
    training_window: dict[str, int] = Field(default_factory=dict, description="start/end s.")
    id_maps: dict[str, dict[str, int]] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    row_tensors: list[str] = Field(default_factory=list)
    parent_sha256: str | None = Field(None, description="The parent version's digest (deltas).")


class ModelStore:
    """Directory-backed store of versioned checkpoints (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def versions(self, name: str) -> list[Version]:
        """Complete versions: real folders named like a version, holding both files."""
        return sorted(
            (v for p in self._named_like_versions(name)
             if str(v := Version.parse(p.name)) == p.name and self._complete(name, p.name)),
            key=Version.key,
        )

    def latest(self, name: str) -> Version | None:
        versions = self.versions(name)
        return versions[-1] if versions else None

    def next_version(self, name: str, *, major: bool) -> Version:
        """The version a new full (``major=True``) or incremental checkpoint should get: past
        every name that looks like a version, complete or not, so that no leftover (an empty
        or partial folder, a symlink) ever stands in a publication's way."""
        taken = [Version.parse(p.name) for p in self._named_like_versions(name)]
        if not taken:
            return Version(major=1, minor=0)
        last = max(taken, key=Version.key)
        if major:
            return Version(major=last.major + 1, minor=0)
        return Version(major=last.major, minor=last.minor + 1)

    def _named_like_versions(self, name: str) -> list[Path]:
        folder = self.root / _checked_name(name)
        if not folder.is_dir():
            return []
        return [p for p in folder.iterdir() if VERSION_RE.fullmatch(p.name)]

    def _complete(self, name: str, version: str) -> bool:
        try:
            self._files(name, version)
        except (OSError, IntegrityError):
            return False
        return True

    def save_full(self, name: str, tensors: dict[str, torch.Tensor], manifest: Manifest) -> Path:
        return self._write(name, _contiguous(tensors), manifest.model_copy(update={"kind": "full"}))

    def save_delta(
        self,
        name: str,
        parent: str,
        changed_rows: dict[str, tuple[torch.Tensor, torch.Tensor]],
        dense: dict[str, torch.Tensor],
        manifest: Manifest,
    ) -> Path:
        """Stores ``changed_rows[t] = (row indices, row values)`` and the ``dense`` tensors."""
        if Version.parse(parent).key() >= Version.parse(manifest.version).key():
            raise ValueError(f"delta {manifest.version} must come after its parent {parent}")
        tensors = dict(_contiguous(dense))
        for key, (rows, values) in changed_rows.items():
            tensors[key + ROWS] = rows.to(torch.int64).contiguous()
            tensors[key + VALUES] = values.contiguous()
        update = {
            "kind": "delta",
            "parent": parent,
            "row_tensors": sorted(changed_rows),
            "parent_sha256": self.digest(name, parent),
        }
        return self._write(name, tensors, manifest.model_copy(update=update))

    def _write(self, name: str, tensors: dict[str, torch.Tensor], manifest: Manifest) -> Path:
        final = self.root / name / manifest.version
        if final.exists() or final.is_symlink():
            raise FileExistsError(f"{name} {manifest.version} already stored")
        staging = final.with_name(f".{manifest.version}.tmp")
        # One writer per model: any staging folder here is what an interrupted write left.
        for stale in final.parent.glob(".*.tmp") if final.parent.exists() else ():
            shutil.rmtree(stale, ignore_errors=True)
        staging.mkdir(parents=True)
        save_file(tensors, str(staging / WEIGHTS))
        (staging / MANIFEST).write_text(manifest.model_dump_json(indent=2))
        staging.rename(final)  # readers never see a half-written version
        log.info("stored model=%s version=%s kind=%s", name, manifest.version, manifest.kind)
        return final

    def digest(self, name: str, version: str) -> str:
        """sha256 of the version's weights file, then its manifest file."""
        weights, manifest = self._read(name, version)
        return _digest(weights, manifest)

    def load(
        self, name: str, version: str, sha256: str
    ) -> tuple[dict[str, torch.Tensor], Manifest]:
        """Tensors and manifest of ``version``, resolving delta chains; its digest must be
        ``sha256`` (else :class:`IntegrityError`), and each parent's the one its child's
        manifest records."""
        weights, raw_manifest = self._read(name, version)
        if _digest(weights, raw_manifest) != sha256:
            raise IntegrityError(f"{name} {version}: digest differs from the announced one")
        manifest = Manifest.model_validate(json.loads(raw_manifest))
        stored = load_bytes(weights)
        if manifest.kind == "full":
            return stored, manifest
        if manifest.parent is None or manifest.parent_sha256 is None:
            raise IntegrityError(f"delta {name} {version} names no parent and its digest")
        tensors, _ = self.load(name, manifest.parent, manifest.parent_sha256)
        for key in manifest.row_tensors:
            tensors[key] = _scatter_rows(tensors.get(key), stored.pop(key + ROWS),
                                         stored.pop(key + VALUES))
        tensors.update(stored)
        return tensors, manifest

    def _read(self, name: str, version: str) -> tuple[bytes, bytes]:
        weights, manifest = self._files(name, version)
        return weights.read_bytes(), manifest.read_bytes()

    def _files(self, name: str, version: str) -> tuple[Path, Path]:
        """The version's weights and manifest, if both are real files of a real folder inside
        the store (OutsideStore otherwise; FileNotFoundError when one is missing)."""
        if not VERSION_RE.fullmatch(version):
            raise ValueError(f"not a version: {version!r}")
        root = self.root.resolve(strict=True)
        folder = self.root / _checked_name(name) / version
        expected = root / name / version
        if folder.is_symlink() or folder.resolve(strict=True) != expected:
            raise OutsideStore(f"{name} {version}: the folder is not the store's own")
        files = folder / WEIGHTS, folder / MANIFEST
        for path in files:
            if path.is_symlink() or path.resolve(strict=True) != expected / path.name:
                raise OutsideStore(f"{name} {version}: {path.name} is not the store's own")
            if not path.is_file():
                raise FileNotFoundError(f"{name} {version}: {path.name} is not a file")
        return files


def _checked_name(name: str) -> str:
    if not MODEL_NAME_RE.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"not a model name: {name!r}")
    return name


def _scatter_rows(
    base: torch.Tensor | None, rows: torch.Tensor, values: torch.Tensor
) -> torch.Tensor:
    needed = int(rows.max()) + 1 if len(rows) else 0
    if base is None:
        base = values.new_zeros((needed, *values.shape[1:]))
    if needed > base.shape[0]:
        pad = base.new_zeros((needed - base.shape[0], *base.shape[1:]))
        base = torch.cat([base, pad])
    base = base.clone()
    base[rows] = values
    return base


def _contiguous(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().contiguous() for k, v in tensors.items()}


def _digest(weights: bytes, manifest: bytes) -> str:
    digest = hashlib.sha256(weights)
    digest.update(manifest)
    return digest.hexdigest()
