"""An idempotent, fenced invoice store: the pattern that makes a rare duplicate run harmless.

A lock limits duplicate runs; it cannot rule them out (a holder paused longer than its lock, a
network partition). So the job's writes must be idempotent and fenced:

* a natural key (one invoice per customer and period), so running a tick twice upserts, not
  appends;
* the fencing token of the grant, stored with the row, so a write from a stale holder (a smaller
  token) is ignored instead of overwriting newer work.

SQLite stands in for your database; the same ``INSERT ... ON CONFLICT ... WHERE`` works in
PostgreSQL.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS invoices (
    customer      TEXT NOT NULL,
    period        TEXT NOT NULL,
    amount_cents  INTEGER NOT NULL,
    fencing_token INTEGER NOT NULL,
    written_by    TEXT NOT NULL,
    PRIMARY KEY (customer, period)
);
CREATE TABLE IF NOT EXISTS runs (
    tick          TEXT NOT NULL,
    holder        TEXT NOT NULL,
    fencing_token INTEGER NOT NULL
);
"""

UPSERT = """
INSERT INTO invoices (customer, period, amount_cents, fencing_token, written_by)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (customer, period) DO UPDATE SET
    amount_cents = excluded.amount_cents,
    fencing_token = excluded.fencing_token,
    written_by = excluded.written_by
WHERE excluded.fencing_token > invoices.fencing_token
"""


class InvoiceStore:
    """Invoices keyed by (customer, period), written only by the newest fencing token."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        with self._connect() as db:
            db.executescript(SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    def upsert(self, customer: str, period: str, amount_cents: int, *, token: int, by: str) -> bool:
        """Write one invoice; returns False when a newer token already wrote it (stale holder)."""
        with self._connect() as db:
            cursor = db.execute(UPSERT, (customer, period, amount_cents, token, by))
            return cursor.rowcount == 1

    def record_run(self, tick: str, holder: str, token: int) -> None:
        with self._connect() as db:
            db.execute("INSERT INTO runs VALUES (?, ?, ?)", (tick, holder, token))

    def runs(self) -> list[tuple[str, str, int]]:
        """Every run recorded, oldest first: (tick, holder, fencing token)."""
        with self._connect() as db:
            rows = db.execute("SELECT tick, holder, fencing_token FROM runs ORDER BY rowid")
            return [(str(t), str(h), int(f)) for t, h, f in rows]
