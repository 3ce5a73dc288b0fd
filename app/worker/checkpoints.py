"""The LangGraph checkpointer on the service's own database: PostgresSaver on
PostgreSQL, SqliteSaver on SQLite. A run's checkpoints are its thread; they are
deleted once the conversion reaches a terminal state."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from sqlalchemy.engine import make_url

from app.storage.database import libpq_conninfo, sqlite_connect


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
    with PostgresSaver.from_conn_string(libpq_conninfo(database_url)) as postgres_saver:
        postgres_saver.setup()
        yield postgres_saver


def prune(database_url: str, thread_id: str) -> None:
    """Drop every checkpoint of a finished run."""
    with open_checkpointer(database_url) as saver:
        saver.delete_thread(thread_id)
