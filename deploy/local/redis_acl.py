"""One Redis ACL user per service, each allowed only what that service does.

The default user is disabled (nobody can log in as it); passwords are random, stored hashed in
the ACL file and in clear only in the git-ignored secrets folder (mode 0600) that services read
at start.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from deploy.local.secret_files import ensure_secret_files

NAMESPACES = ("sr", "test")
"""Every streamrec key lives under `sr:` (benchmarks and demos add a segment, `sr:bench:<id>:`;
tests use `test:<id>:` prefixes)."""

READ_KEYS = " ".join(f"%R~{ns}:*" for ns in NAMESPACES)
"""Read-only on every streamrec key: no write command can touch a key through this pattern."""

FEATURE_KEYS = " ".join(
    f"~{ns}:{segment}{kind}"
    for ns in NAMESPACES
    for segment in ("", "*:")
    for kind in ("[usic]:{*", "pop:{*")
)
"""The feature worker's keys, `<prefix>{u,s,i,c,pop}:{<id>}...` (streams/features/keys.py), with
or without a segment after the namespace, readable and writable (a pattern must grant both for
HINCRBY and ZINCRBY). Nothing else under the prefix matches, so the worker cannot rewrite the
serving configuration (`<prefix>cfg:{serving}:...`) the scorer trusts."""

CLUSTER_TOPOLOGY = "+cluster|slots +cluster|shards +cluster|info"
"""What a cluster client asks to learn which node serves which slot (read-only subcommands; the
rest of CLUSTER is @admin/@dangerous). Granted after `-@dangerous`, so nothing else comes back;
harmless on a single Redis, where the client never sends them."""

# Commands a service may run beyond its categories; -@dangerous removes FLUSHALL, KEYS, CONFIG...
USERS: dict[str, str] = {
    # Writes features with Lua scripts (one round trip per batch); commands inside a script are
    # checked against these key patterns too. INFO (in @dangerous) tells it which Redis process
    # it reached: a new one means a rewind (streams/feature_worker/redis_epoch.py).
    "streams": f"{READ_KEYS} {FEATURE_KEYS} +@read +@write +@connection +@scripting -@dangerous "
    f"+info {CLUSTER_TOPOLOGY}",
    # Reads only: features, availability, business rules. No scripts: a script can write.
    "scorer": f"{READ_KEYS} +@read +@connection -@dangerous {CLUSTER_TOPOLOGY}",
    # Reads features for point-in-time training examples.
    "trainer": f"{READ_KEYS} +@read +@connection -@dangerous {CLUSTER_TOPOLOGY}",
    # Reads features for population-stability checks.
    "monitor": f"{READ_KEYS} +@read +@connection -@dangerous {CLUSTER_TOPOLOGY}",
    # Operators and tests: everything (catalog rules, availability, cleanup).
    "admin": "~* &* +@all",
}


def ensure_passwords(secrets_dir: Path) -> dict[str, str]:
    return ensure_secret_files(secrets_dir, "redis-", USERS)


DEFAULT_USER = "user default off resetchannels ~* &* +@all"
"""Off: no connection can authenticate as it. Its rights are not for clients: Redis 7.0 replays
the AOF as the default user and re-checks every MULTI/EXEC against that user's rights
(redis/redis#14541, fixed only in later releases). The feature script's effects are stored as
MULTI/EXEC blocks, so with `-@all` a restart silently dropped every feature write and logged an
error per block (a 7.7 GB log here) while plain writes came back."""


def acl_file_text(passwords: dict[str, str]) -> str:
    lines = [DEFAULT_USER]
    for user, rules in USERS.items():
        digest = hashlib.sha256(passwords[user].encode()).hexdigest()
        lines.append(f"user {user} on #{digest} resetchannels {rules}")
    return "\n".join(lines) + "\n"
