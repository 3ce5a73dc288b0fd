"""Storage: the migrations create exactly what the models declare, on SQLite and
PostgreSQL; they go down and up again; timestamps come back in UTC; the blob
store addresses content by hash."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from service_fixtures import Database
from sqlalchemy import inspect, text
from sqlalchemy.exc import StatementError

from app.context import ServiceContext
from app.storage.blobs import BlobStore, sha256_bytes
from app.storage.migrate import alembic_config, is_at_head
from app.storage.models import Base, Event


def owned_by_the_models(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """The LangGraph checkpointer keeps its own tables in the same database."""
    table = getattr(obj, "table", obj)
    table_name = name if type_ == "table" else getattr(table, "name", None)
    return not reflected or compare_to is not None or table_name in Base.metadata.tables


def test_migrations_match_the_models(database: Database) -> None:
    with database.engine.begin() as connection:
        connection.execute(
            text("CREATE TABLE IF NOT EXISTS foreign_probe (id INTEGER PRIMARY KEY)")
        )
    with database.engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "include_object": owned_by_the_models}
        )
        differences = compare_metadata(context, Base.metadata)
    with database.engine.begin() as connection:
        connection.execute(text("DROP TABLE foreign_probe"))
    assert differences == []
    assert is_at_head(database.engine)


def test_migrations_go_down_and_up(context: ServiceContext) -> None:
    config = alembic_config()
    with context.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "base")
    assert not is_at_head(context.engine)
    assert "conversions" not in inspect(context.engine).get_table_names()
    with context.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    assert set(Base.metadata.tables) <= set(inspect(context.engine).get_table_names())


def test_timestamps_are_stored_and_read_as_utc(context: ServiceContext) -> None:
    local = datetime(2026, 5, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    with context.sessions.begin() as session:
        session.add(Event(kind="test", created_at=local))
    with context.sessions() as session:
        event = session.query(Event).one()
    assert event.created_at == local
    assert event.created_at.tzinfo is not None and event.created_at.utcoffset() == timedelta(0)
    with pytest.raises(StatementError, match="naive"), context.sessions.begin() as session:
        session.add(Event(kind="naive", created_at=datetime(2026, 5, 1)))
        session.flush()


def test_blob_store_is_content_addressed(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "objects")
    first = store.put_bytes(b"kernel")
    assert first == sha256_bytes(b"kernel") and store.read(first) == b"kernel"
    assert store.path_for(first).parent.name == first[:2]
    source = tmp_path / "file"
    source.write_bytes(b"kernel")
    assert store.put_file(source) == (first, 6)
    assert len(list((tmp_path / "objects").rglob("*"))) == 2
    for bad in ("../../etc/passwd", "A" * 64, "0" * 63):
        with pytest.raises(ValueError):
            store.path_for(bad)
