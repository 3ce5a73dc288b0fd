"""Alembic environment: migrates the connection handed in by the service, or
the database named by DATABASE_URL when run from the alembic command line."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from app.settings import load_settings
from app.storage.database import make_engine
from app.storage.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        run_migrations(connection)
        return
    engine = make_engine(load_settings().resolved_database_url)
    with engine.connect() as fresh:
        run_migrations(fresh)
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (SQL script) migrations are not supported; connect to a database")
run_online()
