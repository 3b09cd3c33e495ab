"""One Redis ACL user per service, each allowed only what that service does.

The default user is disabled; passwords are random, stored hashed in the ACL file and in clear
only in the git-ignored secrets folder (mode 0600) that services read at start.
"""

from __future__ import annotations

import hashlib
import secrets
from pathlib import Path

KEY_PATTERN = "~sr:* ~test:*"
"""Every streamrec key lives under `sr:` (tests use `test:` prefixes)."""

# Commands a service may run beyond its categories; -@dangerous removes FLUSHALL, KEYS, CONFIG...
USERS: dict[str, str] = {
    # Writes features with Lua scripts (one round trip per batch).
    "streams": f"{KEY_PATTERN} +@read +@write +@connection +@scripting -@dangerous",
    # Reads only: features, availability, business rules. No scripts: a script can write.
    "scorer": f"{KEY_PATTERN} +@read +@connection -@dangerous",
    # Reads features for point-in-time training examples.
    "trainer": f"{KEY_PATTERN} +@read +@connection -@dangerous",
    # Reads features for population-stability checks.
    "monitor": f"{KEY_PATTERN} +@read +@connection -@dangerous",
    # Operators and tests: everything (catalog rules, availability, cleanup).
    "admin": "~* &* +@all",
}


def ensure_passwords(secrets_dir: Path) -> dict[str, str]:
    secrets_dir.mkdir(parents=True, exist_ok=True)
    secrets_dir.chmod(0o700)
    passwords = {}
    for user in USERS:
        path = secrets_dir / f"redis-{user}"
        if not path.exists():
            path.write_text(secrets.token_urlsafe(24) + "\n")
            path.chmod(0o600)
        passwords[user] = path.read_text().strip()
    return passwords


def acl_file_text(passwords: dict[str, str]) -> str:
    lines = ["user default off resetchannels -@all"]
    for user, rules in USERS.items():
        digest = hashlib.sha256(passwords[user].encode()).hexdigest()
        lines.append(f"user {user} on #{digest} resetchannels {rules}")
    return "\n".join(lines) + "\n"
