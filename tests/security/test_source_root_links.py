"""A SOURCE_ROOT submission names a module of a library; the intake copies the
modules its kernel needs into the run. A needed module replaced by a link to a
file outside SOURCE_ROOT (a secret of the server) is refused, naming the module,
and not a byte of the secret reaches the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.context import ServiceContext

KERNEL = '''"""vadd, with its tile size from a helper module of the same library."""

import cuda.tile as ct

from kernels.helpers import PADDING


@ct.kernel
def vadd_kernel(a, b, c, TILE: ct.Constant[int]):
    block = ct.bid(0)
    a_tile = ct.load(a, index=(block,), shape=(TILE,), padding_mode=PADDING)
    b_tile = ct.load(b, index=(block,), shape=(TILE,), padding_mode=PADDING)
    ct.store(c, index=(block,), tile=a_tile + b_tile)
'''
HELPERS = "import cuda.tile as ct\n\nPADDING = ct.PaddingMode.ZERO\n"
SECRET = "\nAPI_TOKEN = 'not for runs'\n"


@pytest.fixture
def library(source_root: Path) -> Path:
    """SOURCE_ROOT with a library (lib/kernels/) and a spec naming its module."""
    package = source_root / "lib" / "kernels"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "vadd.py").write_text(KERNEL)
    (package / "helpers.py").write_text(HELPERS)
    specs = source_root / "specs"
    specs.mkdir()
    spec = (source_root / "vadd.port.yaml").read_text()
    spec = spec.replace("source: vadd.py\n", "source_root: ../lib\nmodule: kernels.vadd\n")
    spec = spec.replace("  function: vadd_reference:vadd\n", "  oracle: reference_kernel\n")
    (specs / "vadd.port.yaml").write_text(spec)
    return package


def submit_library_spec(client: TestClient) -> object:
    return client.post("/v1/conversions", json={"spec_path": "specs/vadd.port.yaml"})


def test_a_needed_module_that_is_a_link_out_is_refused(
    client: TestClient, context: ServiceContext, library: Path, tmp_path: Path
) -> None:
    accepted = submit_library_spec(client)
    assert accepted.status_code == 202, accepted.text  # the library as it is: taken
    secret = tmp_path / "secret.py"
    secret.write_text(HELPERS + SECRET)
    (library / "helpers.py").unlink()
    (library / "helpers.py").symlink_to(secret)
    refused = submit_library_spec(client)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert "is a link, or leads out of source_root" in error["message"]
    assert error["detail"]["file"] == "kernels/helpers.py"
    runs = context.settings.resolved_artifact_root / "runs"
    assert not any(
        "not for runs" in path.read_text(errors="replace")
        for path in runs.rglob("*")
        if path.is_file()
    )


def test_a_needed_folder_that_is_a_link_out_is_refused(
    client: TestClient, library: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside" / "kernels"
    outside.parent.mkdir()
    library.rename(outside)
    library.symlink_to(outside)
    refused = submit_library_spec(client)
    assert refused.status_code in (400, 422), refused.text
