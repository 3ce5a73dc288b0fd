"""`tileport tilegym add`: a port delivered as TileGym's own cutile-rs backend, into a
git copy of the unmodified TileGym tree; `tileport tilegym test`'s reading of
pytest's output and its refusal without a GPU.

The data is the unmodified TileGym snapshot and its recorded launches beside the
checkout (`TILEPORT_TILEGYM`, `TILEPORT_TILEGYM_LAUNCHES` override them)."""

from __future__ import annotations

import ctypes
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from app.cli import main as tileport
from nodes.host_builder.binding import VariantBinding
from nodes.host_builder.rust_expr import Kind, Variable
from nodes.host_builder.tilegym_ffi import (
    FfiError,
    SpecExpr,
    _checked_extent,
    _condition,
    render_file,
)
from nodes.spec_writer.writer import read_signature_hints, write_specs
from nodes.tilegym_backend import test_run
from nodes.tilegym_backend.checkout import (
    TILEPORT_HOST_FILES,
    with_backend,
    with_import,
    with_module,
)
from nodes.tilegym_backend.crate_pin import CratePinError, migrated_crate, project_pin
from nodes.tilegym_backend.op_source import OpSourceError, find_op, host_code, op_kernels
from nodes.tilegym_backend.stage import SPEC_COPY
from schemas.kernel_writer import REPORT_FILE, BlockedConstruct, PortReport
from schemas.launch_capture import distinct_launches, read_launch_records
from schemas.verdicts import KernelWriterVerdict
from toolchain.env import REPO_ROOT, cache_dir, toolchain_env

TILEGYM = Path(os.environ.get("TILEPORT_TILEGYM", REPO_ROOT.parent / "shared" / "tilegym"))
LAUNCHES = Path(
    os.environ.get("TILEPORT_TILEGYM_LAUNCHES", REPO_ROOT.parent / "shared" / "tilegym-launches")
)
CUTILE_RS = Path("src/tilegym/ops/cutile_rs")
# The crate moved to the ports' cutile: its pins, ffi_util.rs, TileGym's own ops' borrows.
PIN_FILES = {
    "src/tilegym/ops/cutile_rs/cutile_kernels/Cargo.toml",
    "src/tilegym/ops/cutile_rs/ffi_util.rs",
    "src/tilegym/ops/cutile_rs/attention_sink_kernel/ffi.rs",
    "src/tilegym/ops/cutile_rs/bmm_kernel/ffi.rs",
    "src/tilegym/ops/cutile_rs/matmul_kernel/ffi.rs",
}
RELU_FILES = PIN_FILES | {
    "src/tilegym/ops/cutile_rs/relu_kernel/kernel.rs",
    "src/tilegym/ops/cutile_rs/relu_kernel/ffi.rs",
    "src/tilegym/ops/cutile_rs/relu.py",
    "src/tilegym/ops/cutile_rs/cutile_kernels/src/lib.rs",
    "src/tilegym/ops/cutile_rs/tileport_spec_arith.rs",
    "src/tilegym/ops/cutile_rs/tileport_proven.rs",
    "src/tilegym/ops/cutile_rs/tileport_launch.rs",
    "src/tilegym/ops/cutile_rs/tileport_launch.cpp",
    "src/tilegym/ops/cutile_rs/tileport_launch.py",
    "src/tilegym/ops/cutile_rs/__init__.py",
    "tests/ops/activation/test_relu.py",
}
needs_tilegym = pytest.mark.skipif(
    not ((TILEGYM / "src").is_dir() and (LAUNCHES / "launches.jsonl").is_file()),
    reason="the TileGym snapshot and its recorded launches are not beside the checkout",
)


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def _clean_copy(where: Path) -> Path:
    """A git checkout of the unmodified tree, committed as it is."""
    shutil.copytree(TILEGYM, where, symlinks=True)
    _git(where, "init", "-q")
    _git(where, "add", "-A")
    _git(where, "commit", "-q", "-m", "TileGym as it is")
    return where


def _add(
    checkout: Path, op: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    code = tileport(
        [
            "tilegym",
            "add",
            op,
            "--tilegym",
            str(checkout),
            "--launches",
            str(LAUNCHES / "launches.jsonl"),
            "--work",
            str(work),
        ]
    )
    out, err = capsys.readouterr()
    return code, out, err


# --- the checkout's shared files, without porting -----------------------------------


def test_a_second_op_lands_beside_the_first() -> None:
    lib = '#[path = "../../ffi_util.rs"]\nmod ffi_util;\n\nmod matmul {\n}\n'
    both = with_module(with_module(lib, "relu"), "gelu")
    assert both.index("mod relu {") < both.index("mod gelu {")
    assert with_module(both, "relu") == both
    init = (
        'if is_backend_available("cutile-rs"):\n'
        "    from . import bmm  # noqa: F401  (register dispatch entry)\n"
        "    from . import swiglu  # noqa: F401  (register dispatch entry)\n"
    )
    added = with_import(with_import(init, "relu"), "zeta")
    imports = [line.split()[3] for line in added.splitlines() if "from . import" in line]
    assert imports == ["bmm", "relu", "swiglu", "zeta"]
    assert with_import(added, "relu") == added


def test_cutile_rs_joins_the_backends_after_the_others() -> None:
    test = (
        "class T:\n"
        '    _backends = ["cutile"]\n'
        '    if is_backend_available("tilecpp"):\n'
        '        _backends = _backends + ["tilecpp"]\n'
        '    _perf_backends = _backends + ["pytorch"]\n'
    )
    added = with_backend(test, Path("t.py"))
    assert added.splitlines()[4:6] == [
        '    if is_backend_available("cutile-rs"):',
        '        _backends = _backends + ["cutile-rs"]',
    ]
    assert with_backend(added, Path("t.py")) == added


@needs_tilegym
def test_launch_files_merge_each_distinct_launch_once() -> None:
    shared = read_launch_records(LAUNCHES / "launches.jsonl")
    assert distinct_launches([shared, shared]) == distinct_launches([shared])
    relu = [r for r in shared if r.kernel == "_relu_fwd_kernel"]
    other = [r.model_copy(update={"test": "another test, same launch"}) for r in relu]
    assert distinct_launches([relu, other]) == distinct_launches([relu])
    moved = [r.model_copy(update={"grid": (r.grid[0] + 1, 1, 1)}) for r in relu[:1]]
    assert len(distinct_launches([relu, moved])) == len(distinct_launches([relu])) + 1


def test_a_variants_condition_is_rust_over_the_launch_arguments() -> None:
    variables = {
        "X_0": Variable("x_0", Kind.INT),
        "P": Variable("p", Kind.FLOAT),
        "SEED": Variable("seed", Kind.INT),
        "TRAINING": Variable("training", Kind.BOOL),
        "BLOCK": Variable("block", Kind.INT),
        "dtype": Variable("dty", Kind.DTYPE),
    }
    exprs = SpecExpr(variables, "cutile_op")
    when = "(X_0 == 1024 and P == 0.2 and SEED == -5 and TRAINING == True and dtype == 'float16')"
    assert exprs.rust(when) == (
        "((x_0 == 1024i64) && (p == 0.2f64) && (seed == -5i64) && (training == true) "
        '&& (dty == "f16"))'
    )
    # Python's semantics through spec_arith: `//` floors, `%` takes the divisor's sign.
    assert exprs.rust("cdiv(X_0, BLOCK) > 1 or not TRAINING") == (
        '((checked!("cutile_op", rt::cdiv(x_0, block)) > 1i64) || (!training))'
    )
    assert exprs.rust("X_0 // BLOCK % 3", Kind.INT) == (
        'checked!("cutile_op", rt::modulo(checked!("cutile_op", rt::floordiv(x_0, block)), 3i64))'
    )
    assert exprs.rust("next_pow2(X_0) if TRAINING else X_0", Kind.INT) == (
        '(if training { checked!("cutile_op", rt::next_pow2(x_0)) } else { x_0 })'
    )
    with pytest.raises(FfiError, match="unknown name 'num_sms'"):
        exprs.rust("num_sms > 2")
    with pytest.raises(FfiError, match="'float8_e5m2' is not an element type of ffi_util"):
        exprs.rust("dtype == 'float8_e5m2'")


def test_a_value_the_entry_holds_as_a_literal_must_be_the_callers() -> None:
    # The values the entry was proven with (`held_values`) are compared with the
    # caller's, where the symbol takes what they are computed from.
    variables = {
        "EPS": Variable("eps", Kind.FLOAT),
        "N": Variable("n", Kind.INT),
        "TILE": Variable("tile", Kind.INT),
        "GATHER": Variable("gather", Kind.BOOL),
        "X_0": Variable("x_0", Kind.INT),
    }
    variant = VariantBinding(
        index=0,
        name="v0",
        when="X_0 > 1",
        entry="k_v0",
        constants=(),
        grid=(1, 1, 1),
        params=(),
        generics=(),
        preconditions=(),
        held=(
            ("EPS", 1e-05),
            ("GATHER", False),
            ("cdiv(N, TILE)", 1),
            ("TILE != N", False),  # a comparison compared, not chained
            ("UNPASSED", 4),  # not a parameter of the kernel's symbol: the launcher's own
        ),
    )
    passed = {"EPS", "N", "TILE", "GATHER"}
    condition = _condition(variant, SpecExpr(variables, "cutile_op"), passed)
    assert condition == (
        "(x_0 > 1i64) && (eps == 1e-05f64) && (gather == false) && "
        '(checked!("cutile_op", rt::cdiv(n, tile)) == 1i64) && ((tile != n) == false)'
    )


def test_a_file_imports_the_readers_its_symbols_call() -> None:
    # The readers live once in tileport_launch.rs; a file imports what it calls.
    body = "    let (Some(x_d),) = (descriptor::<2>(&w[0..]),) else { todo!() };\n"
    text = render_file("op", [body], {}, "op.py")
    assert "use crate::tileport_launch::{descriptor};" in text
    assert "fn descriptor" not in text  # never a copy per op
    words = render_file("op", ['    launch_words::<3>(launch); checked!("s", x)\n'], {}, "op.py")
    assert "use crate::tileport_launch::{checked, launch_words};" in words
    assert "use crate::tileport_launch" not in render_file("op", ["    0\n"], {}, "op.py")


def test_a_symbol_checks_only_the_extents_the_ir_depends_on() -> None:
    # An extent of 1 is a static shape in the IR; a literal every record had, or a
    # symbol two arrays shared in the records (layer_norm's square inputs), is not
    # something the reference requires, so the symbol does not refuse it.
    assert _checked_extent(1)
    assert not _checked_extent(524288) and not _checked_extent("X_0")
    assert not _checked_extent("cdiv(X_1, 2)")


def test_a_test_file_without_the_availability_import_gets_it() -> None:
    test = (
        "import pytest\n"
        "import tilegym\n"
        "from tests import common\n"
        "\n"
        "class T:\n"
        '    _backends = ["cutile"]\n'
        "    def test_op(self, backend):\n"
        "        if tilegym.is_backend_available(backend):\n"  # not the bare name
        "            pass\n"
    )
    added = with_backend(test, Path("t.py"))
    assert added.splitlines()[:4] == [
        "import pytest",
        "import tilegym",
        "from tests import common",
        "from tilegym.backend import is_backend_available",
    ]
    assert '    if is_backend_available("cutile-rs"):' in added
    compile(added, "t.py", "exec")


def test_an_ops_tests_are_the_functions_calling_it_without_benchmarks(tmp_path: Path) -> None:
    test = tmp_path / "tests/ops/test_pair.py"
    test.parent.mkdir(parents=True)
    test.write_text(
        "import tilegym\n"
        "from tilegym.ops import b_op\n"
        "class T:\n"
        "    def test_a(self):\n"
        "        tilegym.ops.a_op(1)\n"
        "    def test_perf_a(self):\n"
        "        tilegym.ops.a_op(2)\n"
        "    def test_b(self):\n"
        "        b_op(3)\n"
        "def test_free():\n"
        "    tilegym.ops.a_op(4)\n"
    )
    relative = Path("tests/ops/test_pair.py")
    assert test_run.op_tests(tmp_path, relative, "a_op") == [
        "tests/ops/test_pair.py::test_free",
        "tests/ops/test_pair.py::T::test_a",
    ]
    assert test_run.op_tests(tmp_path, relative, "b_op") == ["tests/ops/test_pair.py::T::test_b"]
    assert test_run.op_tests(tmp_path, relative, "c_op") == ["tests/ops/test_pair.py"]
    # `--benchmarks` runs the benchmarks alone; an op with none has nothing to run.
    assert test_run.op_tests(tmp_path, relative, "a_op", benchmarks=True) == [
        "tests/ops/test_pair.py::T::test_perf_a"
    ]
    assert test_run.op_tests(tmp_path, relative, "b_op", benchmarks=True) == []


@needs_tilegym
def test_the_host_code_is_taken_as_written_with_its_launches_routed() -> None:
    [module] = find_op(TILEGYM / "src", "gelu")
    assert str(module.path) == "tilegym/ops/cutile/activation/gelu.py"
    host = host_code(module, (TILEGYM / "src" / module.path).read_text())
    assert host.kernels == ["_gelu_kernel"]
    # Module constants and imports the host reads; nothing of the kernel's side.
    assert host.imports == [
        "import math",
        "import torch",
        "from tilegym.backend import register_impl",
    ]
    assert host.body.startswith("GELU_EXACT = 0\nGELU_TANH = 1\n\n\nclass _GeluCuTileFunction(")
    assert "def standard_normal_cdf_ct" not in host.body and "@ct.kernel" not in host.body
    assert "ct.launch" not in host.body
    assert (
        "        _launch(\n            torch.cuda.current_stream(),\n            grid,\n"
        in host.body
    )
    assert '@register_impl("gelu", backend="cutile-rs")\ndef gelu(' in host.body
    # Comments and docstrings stay as written.
    assert "Forward pass for GELU activation." in host.body

    [softmax] = find_op(TILEGYM / "src", "softmax")
    host = host_code(softmax, (TILEGYM / "src" / softmax.path).read_text())
    assert len(host.kernels) == 4  # chosen at run time (`kernel = _a if ... else _b`)
    assert "from tilegym.ops.cutile.utils import next_power_of_2" in host.imports  # was relative

    [layer_norm] = find_op(TILEGYM / "src", "layer_norm_legacy")
    assert op_kernels(layer_norm) == ["_layer_norm_fwd_kernel"]  # not its module's other op's
    [persistent] = find_op(TILEGYM / "src", "persistent_layer_norm")
    with pytest.raises(OpSourceError, match="hands the kernel _persistent_layer_norm_fwd_kernel"):
        host_code(persistent, (TILEGYM / "src" / persistent.path).read_text())
    assert find_op(TILEGYM / "src", "no_such_op") == []


@needs_tilegym
def test_the_crate_moves_to_the_ports_cutile_from_head(tmp_path: Path) -> None:
    checkout = _clean_copy(tmp_path / "tilegym")
    texts = migrated_crate(checkout)
    assert {str(p) for p in texts} == PIN_FILES
    manifest = texts[CUTILE_RS / "cutile_kernels/Cargo.toml"]
    assert f'cutile = "={project_pin()}"' in manifest and "=0.2.0" not in manifest
    ffi_util = texts[CUTILE_RS / "ffi_util.rs"]
    assert "cuda_core::Context::new(($device_id) as usize)" in ffi_util
    assert "Tensor::<E>::borrow_raw_parts(d.ptr, context.clone()" in ffi_util
    bmm = texts[CUTILE_RS / "bmm_kernel/ffi.rs"]
    assert "borrow_tensor::<$E>(a_d, &device)" in bmm and "borrow_tensor::<$E>(a_d)" not in bmm
    # Committed, the crate is at the pin: nothing more to move.
    for path, text in texts.items():
        (checkout / path).write_text(text)
    _git(checkout, "commit", "-qam", "cutile moved")
    assert migrated_crate(checkout) == {}
    # A pin it knows no move from is refused.
    manifest_path = checkout / CUTILE_RS / "cutile_kernels/Cargo.toml"
    manifest_path.write_text(manifest.replace(f'"={project_pin()}"', '"=0.3.0"'))
    _git(checkout, "commit", "-qam", "other pin")
    with pytest.raises(CratePinError, match="knows no other move"):
        migrated_crate(checkout)


# --- the command on a copy of the tree ------------------------------------------------


@needs_tilegym
@pytest.mark.slow
def test_relu_lands_in_a_copy_of_tilegym(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkout = _clean_copy(tmp_path / "tilegym")
    work = tmp_path / "work"  # the port is made here once, by the first run

    code, patch, err = _add(checkout, "relu", work, capsys)
    assert code == 0, err
    assert "_relu_fwd_kernel: COMPILED" in err
    changed = {line[3:] for line in _git(checkout, "status", "--porcelain", "-uall").splitlines()}
    assert changed == RELU_FILES
    assert {f"b/{path}" for path in RELU_FILES} == {
        line.split()[-1] for line in patch.splitlines() if line.startswith("diff --git")
    }
    ffi = (checkout / CUTILE_RS / "relu_kernel/ffi.rs").read_text()
    assert 'pub unsafe extern "C" fn cutile_relu(' in ffi
    # Every float class, not only the recorded f16/f32, and any extent: the shape
    # facts are generics computed per launch, not a refusal of unaligned extents.
    assert 'if !matches!(dty, "bf16" | "f16" | "f32") {' in ffi
    assert "lp::Generic::Int(rt::shape_fact(x_d.shape[0]))" in ffi
    # Launched as the kernel writer proved it (no launcher's per-argument hints, G17),
    # the element type a generic argument: one launch, no copy per dtype.
    assert "lp::launch_proven(" in ffi and "lp::Generic::Element(dty)" in ffi
    assert ".async_on(" not in ffi and "dispatch_by_dtype" not in ffi
    assert "shape[0] % 16" not in ffi
    # ct.launch's arguments in its order, packed in words: x, y, N_ELEMENTS, BLOCK_SIZE.
    assert 'pub unsafe extern "C" fn cutile_relu(launch: *const u8) -> i32 {' in ffi
    assert "descriptor::<1>(&w[0..])" in ffi and "descriptor::<1>(&w[4..])" in ffi
    assert "let block_size: i64 = w[9] as i64;" in ffi
    # Both classes the records lack were proven, not only declared: a bf16 and a
    # ragged (odd-extent) configuration, each matching the reference's IR.
    report = PortReport.model_validate_json(
        (work / "relu" / "ports" / "relu_fwd_kernel" / REPORT_FILE).read_text()
    )
    proven = {c.config for c in report.checks if c.exact or c.ir_level == "equivalent"}
    assert any(name.endswith("_as_bfloat16") for name in proven), sorted(proven)
    assert any(name.endswith("_ragged") for name in proven), sorted(proven)
    kernel = (checkout / CUTILE_RS / "relu_kernel/kernel.rs").read_text()
    assert "pub mod relu_module {" in kernel
    wrapper = (checkout / CUTILE_RS / "relu.py").read_text()
    assert '@register_impl("relu", backend="cutile-rs")\ndef relu(x):' in wrapper
    # Each kernel name the launch function of its symbol, given what each ct.launch
    # argument is to it (x and y tensors of rank 1, two integers); how it is packed
    # is tileport_launch's, copied beside the wrapper as it is.
    assert '_relu_fwd_kernel = _LIBRARY.kernel("cutile_relu", b"11qq")' in wrapper
    for copied, source in TILEPORT_HOST_FILES.items():
        assert (checkout / copied).read_bytes() == source.read_bytes()
    assert "int32_t cutile_relu(const char *launch);" in wrapper
    compile(wrapper, "relu.py", "exec")
    for text in (ffi, kernel):  # rustfmt-clean
        formatted = subprocess.run(
            ["rustfmt", "--edition", "2024", "--check"],
            input=text,
            capture_output=True,
            text=True,
            check=False,
        )
        assert formatted.returncode == 0, formatted.stdout

    code, again, err = _add(checkout, "relu", work, capsys)
    assert code == 0 and "nothing changed" in err
    assert again == patch

    fresh = _clean_copy(tmp_path / "fresh")
    (tmp_path / "relu.patch").write_text(patch)
    _git(fresh, "apply", "--check", str(tmp_path / "relu.patch"))

    # Local changes in a file it would write: refused, nothing written.
    dirty = _clean_copy(tmp_path / "dirty")
    lib = dirty / CUTILE_RS / "cutile_kernels/src/lib.rs"
    lib.write_text(lib.read_text() + "// local edit\n")
    code, out, err = _add(dirty, "relu", work, capsys)
    assert code == 1 and out == ""
    assert "local changes" in err and "cutile_kernels/src/lib.rs" in err
    assert not (dirty / CUTILE_RS / "relu.py").exists()
    assert lib.read_text().endswith("// local edit\n")


@needs_tilegym
@pytest.mark.slow
def test_ops_it_cannot_deliver_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkout = _clean_copy(tmp_path / "tilegym")
    code, out, err = _add(checkout, "no_such_op", tmp_path / "work", capsys)
    assert code == 1 and out == ""
    assert "unknown op 'no_such_op'" in err

    # TileGym's own cutile-rs swiglu is not replaced.
    code, out, err = _add(checkout, "get_swiglu", tmp_path / "work", capsys)
    assert code == 1 and "not written by tileport" in err

    # A kernel whose port is not COMPILED: the op is refused with the verdict. The
    # port is one kept in --work from the same spec text (the lifter ports every
    # recorded gelu kernel, so a BLOCKED one is set there).
    work = tmp_path / "blocked"
    records = [
        r for r in read_launch_records(LAUNCHES / "launches.jsonl") if r.kernel == "_gelu_kernel"
    ]
    [spec] = write_specs(
        records,
        checkout / "src",
        work / "gelu" / "specs",
        read_signature_hints(LAUNCHES / "signatures.jsonl"),
        widen=True,  # as `tilegym add` writes it, so the kept port is the one taken
    )[0]
    kept = work / "gelu" / "ports" / spec.path.name.removesuffix(".port.yaml")
    kept.mkdir(parents=True)
    (kept / SPEC_COPY).write_text(spec.path.read_text())
    blocked = PortReport(
        kernel="_gelu_kernel",
        spec=str(spec.path),
        verdict=KernelWriterVerdict.BLOCKED,
        summary="tanh at gelu.py:40 has no lifting",
        blocked=[BlockedConstruct(op="math.tanh", location="gelu.py:40", missing="a lifting")],
    )
    (kept / REPORT_FILE).write_text(blocked.model_dump_json())
    code, out, err = _add(checkout, "gelu", work, capsys)
    assert code == 1 and out == ""
    assert "not every kernel of gelu ported COMPILED: _gelu_kernel: BLOCKED (tanh" in err
    assert _git(checkout, "status", "--porcelain") == ""


# --- tileport tilegym test ------------------------------------------------------------


def test_pytest_summaries_are_counted() -> None:
    assert test_run.parse_counts(
        "....s.F\n=========== 1 failed, 5 passed, 1 skipped, 12 deselected in 3.21s ==========\n"
    ) == {"passed": 5, "failed": 1, "skipped": 1, "errors": 0}
    assert test_run.parse_counts("4 passed, 2 errors in 1.0s\n") == {
        "passed": 4,
        "failed": 0,
        "skipped": 0,
        "errors": 2,
    }
    assert test_run.parse_counts("no tests ran in 0.01s\n") == {
        "passed": 0,
        "failed": 0,
        "skipped": 0,
        "errors": 0,
    }


def test_without_a_gpu_the_tests_are_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    code = tileport(
        ["tilegym", "test", "relu", "--tilegym", str(tmp_path), "--out", str(tmp_path / "out")]
    )
    assert code == 4
    assert "skipped: no GPU: nvidia-smi is not installed" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# --- the patched crate, built --------------------------------------------------------


@needs_tilegym
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")
def test_the_patched_crate_builds_with_every_op(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The crate as the patch leaves it — TileGym's own five ops and relu, at the ports'
    cutile — builds, and the library exports every op's symbol. Built offline from
    this project's lock file (TileGym commits none) into a cache target."""
    checkout = _clean_copy(tmp_path / "tilegym")
    code, _, err = _add(checkout, "relu", tmp_path / "work", capsys)
    assert code == 0, err
    crate = checkout / CUTILE_RS / "cutile_kernels"
    shutil.copy(REPO_ROOT / "kernels_rs" / "Cargo.lock", crate / "Cargo.lock")
    target = cache_dir() / "target-tilegym"
    built = subprocess.run(
        ["cargo", "build", "--release", "--offline"],
        cwd=crate,
        env={**toolchain_env(), "CARGO_TARGET_DIR": str(target)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", str(target / "release/libcutile_kernels.so")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for op in ("matmul", "bmm", "silu_and_mul", "swiglu", "attention_sink", "relu"):
        assert f" T cutile_{op}" in symbols, op
    _relu_serves_what_no_record_holds(target / "release/libcutile_kernels.so")


def _relu_serves_what_no_record_holds(library: Path) -> None:
    """relu's records hold float32 and float16 launches of extents divisible by 16
    with BLOCK_SIZE 1024. Called with what none holds (bfloat16, 1,001 elements at
    an odd address, BLOCK_SIZE 512), its symbol passes every check and goes on to
    open the device (here: an invalid device id, so no GPU is needed); a launch it
    was not proven for is refused before that."""
    relu = ctypes.CDLL(str(library)).cutile_relu
    relu.restype = ctypes.c_int32
    relu.argtypes = [ctypes.c_char_p]
    f32, f16, bf16, i32 = 0, 1, 2, 3  # ffi_util's dtype codes

    def call(x_dtype: int, y_dtype: int, n: int, block: int, stride: int = 1, grid: int = 0) -> int:
        grid = grid or -(-n // block)
        x = (0x7F0000000002, x_dtype, n, stride)
        y = (0x7F0000100002, y_dtype, n, stride)
        # The words as the wrapper packs them: x, y, N_ELEMENTS, BLOCK_SIZE, the grid,
        # the device (an invalid one) and the stream.
        tensors, constants, tail = "Qqqq" * 2, "qq", "qqq" + "q" + "Q"
        words = struct.pack(f"<{tensors}{constants}{tail}", *x, *y, n, block, grid, 1, 1, -1, 0)
        return int(relu(words))

    invalid_args, unsupported_dtype, device_init_failed = -6, -2, -4
    assert call(bf16, bf16, 1001, 512) == device_init_failed
    assert call(f16, f16, 1, 1024) == device_init_failed
    assert call(f32, f32, 4096, 1024) == device_init_failed
    assert call(f32, f16, 1001, 512) == invalid_args  # mixed dtypes: not ct.launch's
    assert call(i32, i32, 1001, 512) == unsupported_dtype  # relu's host takes floats
    assert call(f32, f32, 1001, 512, stride=2) == invalid_args  # read as contiguous
    # An extent past the kernel's i32 is refused, never truncated to a small one.
    assert call(f32, f32, (1 << 32) + 1001, 512) == invalid_args
    # So is a grid past u32, and a missing launch.
    assert call(f32, f32, 1001, 512, grid=1 << 32) == invalid_args
    assert int(relu(None)) == -5  # NULL_PTR
