"""The LangGraph checkpointer on the service's own database: PostgresSaver on
PostgreSQL, SqliteSaver on SQLite. A run's checkpoints are its thread; they are
deleted once the conversion reaches a terminal state (a run awaiting a GPU keeps
them: its completion forks the thread).

PostgresSaver.setup() is not safe to run in two processes at once on a fresh
database (both insert the same migration row), so on PostgreSQL it runs under a
session advisory lock: jobs that start together set it up one after the other."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from sqlalchemy.engine import make_url

from app.storage.database import libpq_conninfo, sqlite_connect

SETUP_LOCK_KEY = int.from_bytes(b"tileport", "big")
"""pg_advisory_lock key of the checkpointer's setup (any bigint unique to it)."""


SETUP_LOCK_POLL_S = 0.05


@contextmanager
def setup_lock(conninfo: str) -> Iterator[None]:
    """Hold the setup's advisory lock; closing the connection releases it. Taken by
    polling pg_try_advisory_lock: a session blocked in pg_advisory_lock holds a
    snapshot, which the setup's CREATE INDEX CONCURRENTLY would wait for forever."""
    with psycopg.connect(conninfo, autocommit=True) as connection:
        while True:
            row = connection.execute(
                "SELECT pg_try_advisory_lock(%s)", (SETUP_LOCK_KEY,)
            ).fetchone()
            if row is not None and row[0]:
                break
            time.sleep(SETUP_LOCK_POLL_S)
        yield


@contextmanager
def open_checkpointer(database_url: str) -> Iterator[Any]:
    if make_url(database_url).get_backend_name() == "sqlite":
        connection = sqlite_connect(database_url)
        try:
            sqlite_saver = SqliteSaver(connection)
            sqlite_saver.setup()
            yield sqlite_saver
        finally:
            connection.close()
        return
    conninfo = libpq_conninfo(database_url)
    with PostgresSaver.from_conn_string(conninfo) as postgres_saver:
        with setup_lock(conninfo):
            postgres_saver.setup()
        yield postgres_saver


def prune(database_url: str, thread_id: str) -> None:
    """Drop every checkpoint of a finished run."""
    with open_checkpointer(database_url) as saver:
        saver.delete_thread(thread_id)
