"""The LangGraph checkpointer on a fresh PostgreSQL database: many jobs starting
at the same moment each set it up, and every one of them must get through (its
setup runs under a database lock, once at a time)."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from service_fixtures import POSTGRES_URL, postgres_reachable, postgres_schema_url
from sqlalchemy import text

from app.storage.database import make_engine

JOBS = 20
CHILD = Path(__file__).with_name("checkpoint_child.py")


@pytest.fixture
def fresh_schema() -> Iterator[str]:
    """The URL of an empty PostgreSQL schema: no checkpoint table exists yet."""
    if not postgres_reachable():
        pytest.skip(f"PostgreSQL is not reachable at {POSTGRES_URL}")
    schema = f"tileport_ckpt_{uuid.uuid4().hex[:10]}"
    admin = make_engine(POSTGRES_URL)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    yield postgres_schema_url(schema)
    with admin.begin() as connection:
        connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


@pytest.mark.slow
def test_jobs_starting_together_on_a_fresh_database_all_finish(
    fresh_schema: str, tmp_path: Path
) -> None:
    start_at = time.time() + 15.0  # every child has imported everything by then
    children = [
        subprocess.Popen(
            [
                sys.executable,
                str(CHILD),
                fresh_schema,
                str(start_at),
                f"job-{n}",
                str(tmp_path / f"{n}"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for n in range(JOBS)
    ]
    outputs = [child.communicate(timeout=300)[0].decode() for child in children]
    failed = [out[-1500:] for child, out in zip(children, outputs, strict=True) if child.returncode]
    assert not failed, failed[0]
    assert all(out.strip().endswith(": PASS") for out in outputs)
