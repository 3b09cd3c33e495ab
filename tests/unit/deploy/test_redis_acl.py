from __future__ import annotations

from pathlib import Path

from deploy.local.redis_acl import USERS, acl_file_text, ensure_passwords

EXAMPLE = Path(__file__).resolve().parents[3] / "deploy" / "redis" / "users.acl.example"


def test_compose_acl_example_grants_exactly_what_the_local_stack_grants() -> None:
    lines = [line for line in EXAMPLE.read_text().splitlines() if not line.startswith("#")]
    rules = {
        line.split()[1]: line.split(" ", 4)[4] for line in lines if line.split()[1] != "default"
    }
    assert rules == {user: f"resetchannels {r}" for user, r in USERS.items()}


def test_default_user_is_disabled_and_passwords_are_stored_hashed(tmp_path: Path) -> None:
    passwords = ensure_passwords(tmp_path)
    text = acl_file_text(passwords)
    assert text.splitlines()[0].startswith("user default off")
    for password in passwords.values():
        assert password not in text
    assert all((tmp_path / f"redis-{u}").stat().st_mode & 0o077 == 0 for u in USERS)


def test_passwords_are_generated_once(tmp_path: Path) -> None:
    assert ensure_passwords(tmp_path) == ensure_passwords(tmp_path)


def test_read_only_services_get_no_write_or_script_rights() -> None:
    for user in ("scorer", "trainer", "monitor"):
        assert "+@write" not in USERS[user]
        assert "+@scripting" not in USERS[user]


def test_service_users_may_learn_the_cluster_topology_and_nothing_more_of_cluster() -> None:
    for user, rules in USERS.items():
        if user == "admin":
            continue
        granted = rules.split(" ")
        assert granted[-3:] == ["+cluster|slots", "+cluster|shards", "+cluster|info"]
        assert granted.index("-@dangerous") < granted.index("+cluster|slots")
