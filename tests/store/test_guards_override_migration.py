"""Migration 24: `rewards.guards.override` goes to the keys and accounts that held every permission before it
(owners, bootstrap keys), never to a key that may only publish; the stored text stays sorted JSON."""

from __future__ import annotations

import json
from pathlib import Path

from rewards_lab.contract.permissions import ALL_PERMISSIONS
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.schema import MIGRATIONS

NEW = "rewards.guards.override"


def test_only_full_access_keys_are_granted_the_override_permission(tmp_path: Path) -> None:
    statements = next(migration.statements for migration in MIGRATIONS if migration.version == 24)
    grants = [statement for statement in statements if statement.lstrip().startswith("UPDATE")]
    assert len(grants) == 2
    before = sorted(ALL_PERMISSIONS - {NEW})
    holders = {
        "key_full": before,
        "key_publisher": ["rewards.activate", "rewards.edit", "rewards.view"],
        "key_almost": [code for code in before if code != "ai.use"],
        "key_already": sorted(ALL_PERMISSIONS),
    }
    with Database(tmp_path / "m.duckdb") as database:
        con = database.reader()
        for key_id, permissions in holders.items():
            con.execute(
                "INSERT INTO api_keys VALUES (?, 'org_1', 'sandbox', ?, 'rlk', ?, ?, NULL, ?, NULL)",
                [key_id, key_id, f"hash-{key_id}", json.dumps(sorted(permissions)), utcnow()],
            )
        for statement in grants:
            con.execute(statement)
        stored = dict(con.execute("SELECT id, permissions FROM api_keys").fetchall())
    assert stored["key_full"] == json.dumps(sorted(ALL_PERMISSIONS))  # sorted JSON, as the service writes it
    assert stored["key_already"] == json.dumps(sorted(ALL_PERMISSIONS))  # not granted twice
    assert NEW not in json.loads(stored["key_publisher"])
    assert NEW not in json.loads(stored["key_almost"])
