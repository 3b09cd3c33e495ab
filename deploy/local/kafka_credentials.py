"""SCRAM credentials of every Kafka principal (streams/kafka/principals.py) for the local broker.

Passwords are random, kept in clear only in the git-ignored secrets folder (mode 0600, one file
`kafka-<principal>` each) that services and `streamrec client-config` read, and on the broker
only as salted SCRAM hashes. A missing file gets a new password: deleting one and running
`streamrec up` rotates that principal's credential.
"""

from __future__ import annotations

from pathlib import Path

from deploy.local.secret_files import ensure_secret_files
from streams.kafka.principals import PRINCIPALS

MECHANISM = "SCRAM-SHA-512"
ITERATIONS = 8192


def ensure_passwords(secrets_dir: Path) -> dict[str, str]:
    return ensure_secret_files(secrets_dir, "kafka-", PRINCIPALS)


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
