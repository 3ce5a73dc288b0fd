"""Fixtures of the service tests (tests/service, tests/security). Every test that
uses the database (through `settings`, `context` or `client`) runs twice: on a
SQLite file and on the real PostgreSQL (a schema of its own per test run, dropped
at the end; tables emptied between tests)."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient
from service_support import AUTH, FIXTURES, TOKEN, make_context
from sqlalchemy import Engine, text

from app.api.main import create_app
from app.context import ServiceContext
from app.settings import Settings, load_settings
from app.storage.database import make_engine
from app.storage.migrate import upgrade_to_head
from app.storage.models import Base

POSTGRES_URL = os.environ.get(
    "TILEPORT_TEST_POSTGRES", "postgresql+psycopg://root@127.0.0.1:5432/test"
)


def postgres_reachable() -> bool:
    conninfo = POSTGRES_URL.replace("postgresql+psycopg://", "postgresql://")
    try:
        with psycopg.connect(conninfo, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


def postgres_schema_url(schema: str) -> str:
    return f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"


@dataclass
class Database:
    url: str
    engine: Engine


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Database]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'tileport.db'}"
        engine = make_engine(url)
        upgrade_to_head(engine)
        yield Database(url, engine)
        engine.dispose()
        return
    if not postgres_reachable():
        pytest.skip(f"PostgreSQL is not reachable at {POSTGRES_URL}")
    schema = f"tileport_test_{uuid.uuid4().hex[:10]}"
    admin = make_engine(POSTGRES_URL)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = postgres_schema_url(schema)
    engine = make_engine(url)
    upgrade_to_head(engine)
    yield Database(url, engine)
    engine.dispose()
    with admin.begin() as connection:
        connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


def empty_tables(engine: Engine) -> None:
    tables = [table.name for table in reversed(Base.metadata.sorted_tables)]
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE"))
        else:
            for table in tables:
                connection.execute(text(f"DELETE FROM {table}"))


@pytest.fixture
def source_root(tmp_path: Path) -> Path:
    root = tmp_path / "sources"
    shutil.copytree(FIXTURES, root)
    return root


@pytest.fixture
def settings(database: Database, tmp_path: Path, source_root: Path) -> Settings:
    empty_tables(database.engine)
    return load_settings(
        {},
        data_dir=tmp_path / "data",
        database_url=database.url,
        source_root=source_root,
        api_tokens={"ci": TOKEN},
        github_webhook_secret="webhook-secret",
        max_upload_bytes=64 * 1024,
        queue_max_pending=50,
        lease_s=3.0,
        poll_s=0.2,
    )


@pytest.fixture
def context(settings: Settings) -> Iterator[ServiceContext]:
    built = make_context(settings)
    yield built
    built.engine.dispose()


@pytest.fixture
def client(context: ServiceContext) -> Iterator[TestClient]:
    """A client that holds the `ci` token, as the API's users do (reads need one)."""
    with TestClient(create_app(context), headers=AUTH) as test_client:
        yield test_client


@pytest.fixture
def anonymous(context: ServiceContext) -> Iterator[TestClient]:
    """A client without a token."""
    with TestClient(create_app(context)) as test_client:
        yield test_client
