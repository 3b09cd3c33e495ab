"""Generated passwords kept one per file (0600) in a 0700 folder, created once and reused."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from pathlib import Path


def ensure_secret_files(secrets_dir: Path, prefix: str, names: Iterable[str]) -> dict[str, str]:
    """name -> password, from `<secrets_dir>/<prefix><name>`; a missing file gets a new random
    password (so deleting one and running `streamrec up` rotates it). A new file is created 0600
    before anything is written to it."""
    secrets_dir.mkdir(parents=True, exist_ok=True)
    secrets_dir.chmod(0o700)
    passwords = {}
    for name in names:
        path = secrets_dir / f"{prefix}{name}"
        if not path.exists():
            path.touch(mode=0o600)
            path.write_text(secrets.token_urlsafe(24) + "\n")
        path.chmod(0o600)
        passwords[name] = path.read_text().strip()
    return passwords
