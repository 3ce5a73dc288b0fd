"""Reference export: artefacts and record of a good kernel, and a structured,
located error (never a traceback) for each way an untrusted kernel can fail."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from scale_case import SCALE_SPEC

from schemas.reference_export import ExportError, ExportRecord
from toolchain.env import REPO_ROOT
from toolchain.reference_export import (
    RECORD_FILE,
    ReferenceExportError,
    SandboxLimits,
    export_from_spec,
    main,
)
from toolchain.sandbox import network_isolation_works

SOFTMAX_SPEC = REPO_ROOT / "examples" / "kernels" / "softmax.port.yaml"
QUICK = SandboxLimits(timeout_s=60)

GOOD_KERNEL = """\
import cuda.tile as ct


@ct.kernel
def scale_kernel(x, y, TILE: ct.Constant[int]):
    block = ct.bid(0)
    tile = ct.load(x, index=(block,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(block,), tile=tile * 2.0)
"""

SPEC = SCALE_SPEC


def needing(module_code: str) -> str:
    """A kernel that reads `SCALE`, after module code that binds it: only what a kernel
    needs runs at export (toolchain.kernel_slice), so hostile code must be needed."""
    head = textwrap.dedent(module_code).strip()
    body = GOOD_KERNEL.replace("tile * 2.0", "tile * SCALE").replace("import cuda.tile as ct\n", "")
    return f"import cuda.tile as ct\n{head}\n{body}"


def write_case(directory: Path, kernel_source: str) -> Path:
    (directory / "kernel.py").write_text(textwrap.dedent(kernel_source))
    spec = directory / "scale.port.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    return spec


def export_error(tmp_path: Path, kernel_source: str, limits: SandboxLimits = QUICK) -> ExportError:
    spec = write_case(tmp_path, kernel_source)
    with pytest.raises(ReferenceExportError) as caught:
        export_from_spec(spec, tmp_path / "out", limits=limits)
    error = caught.value.error
    assert "Traceback" not in error.message
    return error


def test_softmax_export_writes_every_artefact(tmp_path: Path) -> None:
    record = export_from_spec(SOFTMAX_SPEC, tmp_path)
    [variant] = record.variants
    assert variant.variant == "row"
    assert variant.symbol == "softmax_kernel_Kt1_A2f32_1v4l0_2t1_p16_A2f32_1v4l0_2t1_p16_I1024"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        RECORD_FILE,
        "row.bytecode",
        "row.loc.mlir",
        "row.mlir",
        "row.sm_100.cubin",
        "row.sm_90.cubin",
    ]
    mlir = (tmp_path / "row.mlir").read_text()
    assert mlir.startswith(f"entry @{variant.symbol}(")
    assert "padding_value = neg_inf" in mlir and "loc(" not in mlir
    assert "loc(" in (tmp_path / "row.loc.mlir").read_text()
    for target in ("sm_90", "sm_100"):
        assert (tmp_path / f"row.{target}.cubin").read_bytes()[:4] == b"\x7fELF"
    saved = ExportRecord.model_validate_json((tmp_path / RECORD_FILE).read_text())
    assert saved == record
    assert record.bytecode_version == "13.3" and record.cuda_tile_version == "1.7.0"
    assert "13.4" in record.tileiras_version
    assert variant.timings.bytecode_s > 0 and set(variant.timings.cubin_s) == {"sm_90", "sm_100"}
    facts = variant.specialisation.params["x"]
    assert facts.kind == "array" and facts.facts.shape_divisible_by == [1, 1]
    assert variant.specialisation.config == "ragged_f32"


def test_export_is_deterministic(tmp_path: Path) -> None:
    first = export_from_spec(SOFTMAX_SPEC, tmp_path / "a", cubin_targets=["sm_90"])
    second = export_from_spec(SOFTMAX_SPEC, tmp_path / "b", cubin_targets=["sm_90"])
    name = first.variants[0].bytecode
    assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    cubin = first.variants[0].cubins["sm_90"]
    assert (tmp_path / "a" / cubin).read_bytes() == (tmp_path / "b" / cubin).read_bytes()
    assert second.variants[0].symbol == first.variants[0].symbol


def test_hints_reach_the_entry(tmp_path: Path) -> None:
    spec = write_case(tmp_path, GOOD_KERNEL)
    data = yaml.safe_load(spec.read_text())
    data["variants"][0]["hints"] = {"occupancy": 2}
    spec.write_text(yaml.safe_dump(data))
    record = export_from_spec(spec, tmp_path / "out", cubin_targets=[])
    mlir = (tmp_path / "out" / record.variants[0].mlir).read_text()
    assert "occupancy = 2" in mlir.splitlines()[0]


def test_fixed_entry_symbol(tmp_path: Path) -> None:
    spec = write_case(tmp_path, GOOD_KERNEL)
    data = yaml.safe_load(spec.read_text())
    data["entry_symbol"] = {"naming": "fixed", "symbol": "scale_entry"}
    spec.write_text(yaml.safe_dump(data))
    record = export_from_spec(spec, tmp_path / "out", cubin_targets=[])
    assert record.variants[0].symbol == "scale_entry"


def test_source_override_and_unknown_variant(tmp_path: Path) -> None:
    spec = write_case(tmp_path, GOOD_KERNEL)
    other = tmp_path / "copy.py"
    other.write_text(GOOD_KERNEL)
    record = export_from_spec(spec, tmp_path / "out", source=other, cubin_targets=[])
    assert record.source == str(other)
    with pytest.raises(ReferenceExportError) as caught:
        export_from_spec(spec, tmp_path / "out", variants=["nope"])
    assert caught.value.error.kind == "spec_error"
    assert "unknown variant(s) ['nope']" in caught.value.error.message


def test_syntax_error(tmp_path: Path) -> None:
    error = export_error(tmp_path, "import cuda.tile as ct\n\ndef broken(:\n    pass\n")
    assert (error.kind, error.line, error.source_line) == ("syntax_error", 3, "def broken(:")
    assert error.file == str(tmp_path / "kernel.py")


def test_exception_in_needed_module_code(tmp_path: Path) -> None:
    source = needing("def _scale():\n    raise RuntimeError('boom')\nSCALE = _scale()")
    error = export_error(tmp_path, source)
    assert error.kind == "import_error"
    assert error.message == "RuntimeError: boom"
    assert (error.line, error.source_line) == (3, "raise RuntimeError('boom')")


def test_module_code_the_kernel_does_not_need_never_runs(tmp_path: Path) -> None:
    source = GOOD_KERNEL + "\nraise RuntimeError('host code')\n"
    spec = write_case(tmp_path, source)
    record = export_from_spec(spec, tmp_path / "out", limits=QUICK)
    assert record.variants[0].symbol.startswith("scale_kernel_")


def test_a_module_that_is_not_installed_gets_a_stand_in(tmp_path: Path) -> None:
    source = needing("import torch_not_installed\nimport torch\nSCALE = 2.0")
    source = source.replace("tile * SCALE", "ct.astype(tile * SCALE, torch.float32)")
    spec = write_case(tmp_path, source)
    record = export_from_spec(spec, tmp_path / "out", limits=QUICK)
    assert record.variants[0].symbol.startswith("scale_kernel_")


def test_an_installed_library_is_itself_not_a_stand_in(tmp_path: Path) -> None:
    # A kernel reading numpy's constants (`np.inf`): a stand-in cannot be a constant's
    # value, the installed numpy can.
    source = needing("import numpy as np\nSCALE = 2.0").replace(
        "tile * SCALE", "ct.maximum(tile * SCALE, ct.full((TILE,), -np.inf, dtype=x.dtype))"
    )
    spec = write_case(tmp_path, source)
    record = export_from_spec(spec, tmp_path / "out", limits=QUICK)
    assert record.variants[0].symbol.startswith("scale_kernel_")


def test_a_stand_in_where_a_value_is_needed_names_what_is_missing(tmp_path: Path) -> None:
    source = needing("import not_installed_lib as nl\nSCALE = nl.inf")
    error = export_error(tmp_path, source)
    assert "not_installed_lib.inf" in error.message and "not installed" in error.message


def test_missing_relative_import(tmp_path: Path) -> None:
    error = export_error(tmp_path, needing("from .helpers import SCALE"))
    assert error.kind == "import_error" and error.line == 2
    assert "relative import" in error.message or "No module named" in error.message


def test_type_mismatch_in_kernel(tmp_path: Path) -> None:
    source = GOOD_KERNEL.replace("tile * 2.0", "tile << 1")
    error = export_error(tmp_path, source)
    assert error.kind == "compile_error" and error.variant == "tile256"
    assert error.line == 8 and "tile << 1" in (error.source_line or "")
    assert error.column is not None


def test_shape_mismatch_in_kernel(tmp_path: Path) -> None:
    source = GOOD_KERNEL.replace(
        "tile * 2.0", "tile + ct.full((TILE // 2,), 1.0, dtype=ct.float32)"
    )
    error = export_error(tmp_path, source)
    assert error.kind == "compile_error" and error.line == 8
    assert "shape" in error.message.lower()


def test_kernel_not_found(tmp_path: Path) -> None:
    error = export_error(tmp_path, GOOD_KERNEL.replace("def scale_kernel", "def other_kernel"))
    assert error.kind == "kernel_not_found" and "'scale_kernel'" in error.message


def test_not_a_kernel(tmp_path: Path) -> None:
    error = export_error(
        tmp_path, "import cuda.tile as ct\n\ndef scale_kernel(x, y, TILE):\n    pass\n"
    )
    assert error.kind == "kernel_not_found" and "not a @ct.kernel" in error.message


def test_signature_mismatch_points_at_the_def(tmp_path: Path) -> None:
    error = export_error(tmp_path, GOOD_KERNEL.replace("(x, y, TILE", "(x, y, z, TILE"))
    assert error.kind == "signature_mismatch" and "['z']" in error.message
    assert error.source_line is not None and error.source_line.startswith("def scale_kernel")


def test_constant_given_for_an_array_parameter(tmp_path: Path) -> None:
    source = GOOD_KERNEL.replace(
        "(x, y, TILE: ct.Constant[int])", "(x, y: ct.Constant[int], TILE: ct.Constant[int])"
    )
    error = export_error(tmp_path, source)
    assert error.kind in ("signature_mismatch", "compile_error")


def test_timeout_kills_the_export(tmp_path: Path) -> None:
    source = needing("import time\nSCALE = time.sleep(60) or 2.0")
    error = export_error(tmp_path, source, SandboxLimits(timeout_s=3))
    assert error.kind == "timeout" and "3 s" in error.message


def test_memory_limit(tmp_path: Path) -> None:
    source = needing("SCALE = len(bytearray(8 * 1024**3))")
    error = export_error(tmp_path, source, SandboxLimits(address_space_bytes=2 << 30))
    assert error.kind == "memory_limit" and error.line == 2


def test_sandbox_environment_and_directory(tmp_path: Path) -> None:
    probe = """\
    import json, os
    def _probe():
        raise RuntimeError(json.dumps({"cwd": os.getcwd(), "env": sorted(os.environ)}))
    SCALE = _probe()
    """
    error = export_error(tmp_path, needing(probe))
    seen = json.loads(error.message.removeprefix("RuntimeError: "))
    assert Path(seen["cwd"]).name.startswith("tileport-export-")
    assert Path(seen["cwd"]) != Path.cwd()
    allowed = {
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "PYTHONPATH",
        "PYTHONDONTWRITEBYTECODE",
        "CUDA_TILE_TEMP_DIR",
        "CUDA_TILE_CACHE_DIR",
        "CUDA_TOOLKIT_PATH",
        "CUDA_HOME",
        "CUDA_PATH",
        "LIBCLANG_PATH",
        "CUTILE_TILEIRAS_PATH",
        "CARGO_TARGET_DIR",
        "LD_LIBRARY_PATH",
        "BINDGEN_EXTRA_CLANG_ARGS",
        "LC_CTYPE",
    }
    assert set(seen["env"]) <= allowed


@pytest.mark.skipif(not network_isolation_works(), reason="unshare -n is not permitted here")
def test_no_network_in_the_sandbox(tmp_path: Path) -> None:
    probe = """\
    import socket
    def _probe():
        try:
            socket.create_connection(("127.0.0.1", 5432), timeout=2).close()
            raise RuntimeError("connected")
        except OSError as exc:
            raise RuntimeError(f"refused: {exc}") from None
    SCALE = _probe()
    """
    error = export_error(tmp_path, needing(probe))
    assert error.message.startswith("RuntimeError: refused")


def test_spec_errors_are_structured(tmp_path: Path) -> None:
    spec = write_case(tmp_path, GOOD_KERNEL)
    spec.write_text(spec.read_text().replace("kernel: scale_kernel", "kernel: 3"))
    with pytest.raises(ReferenceExportError) as caught:
        export_from_spec(spec, tmp_path / "out")
    assert caught.value.error.kind == "spec_error"
    assert caught.value.error.file == str(spec) and "kernel" in caught.value.error.message


def test_missing_source_file(tmp_path: Path) -> None:
    spec = write_case(tmp_path, GOOD_KERNEL)
    (tmp_path / "kernel.py").unlink()
    with pytest.raises(ReferenceExportError) as caught:
        export_from_spec(spec, tmp_path / "out")
    assert (
        caught.value.error.kind == "import_error" and "no such file" in caught.value.error.message
    )


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_case(tmp_path, GOOD_KERNEL)
    assert main([str(spec), "--out", str(tmp_path / "out")]) == 0
    assert "tile256: scale_kernel_Kt1_" in capsys.readouterr().out
    (tmp_path / "kernel.py").write_text(needing("SCALE = int('no')"))
    assert main([str(spec), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "kernel.py:2: import_error: ValueError: invalid literal" in err
    assert "Traceback" not in err
