"""SCRAM credentials of every Kafka principal (streams/kafka/principals.py) for the local broker.

Passwords are random, kept in clear only in the git-ignored secrets folder (mode 0600, one file
`kafka-<principal>` each) that services and `streamrec client-config` read, and on the broker
only as salted SCRAM hashes. A missing file gets a new password: deleting one and running
`streamrec up` rotates that principal's credential.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from streams.kafka.principals import PRINCIPALS

MECHANISM = "SCRAM-SHA-512"
ITERATIONS = 8192


def ensure_passwords(secrets_dir: Path) -> dict[str, str]:
    secrets_dir.mkdir(parents=True, exist_ok=True)
    secrets_dir.chmod(0o700)
    passwords = {}
    for principal in PRINCIPALS:
        path = secrets_dir / f"kafka-{principal}"
        if not path.exists():
            path.touch(mode=0o600)
            path.write_text(secrets.token_urlsafe(24) + "\n")
        path.chmod(0o600)
        passwords[principal] = path.read_text().strip()
    return passwords


def format_arguments(passwords: dict[str, str]) -> list[str]:
    """`kafka-storage format` arguments that store every credential with the new cluster's
    first metadata, so the broker and `admin` can log in from the first start."""
    args = []
    for principal, password in passwords.items():
        args += [
            "--add-scram",
            f"{MECHANISM}=[name={principal},iterations={ITERATIONS},password={password}]",
        ]
    return args
