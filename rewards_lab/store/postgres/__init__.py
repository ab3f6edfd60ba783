"""The PostgreSQL store (issue 32): `PostgresStore`, the repositories over the dialect's rendered SQL."""
