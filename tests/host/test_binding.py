"""Binding a port to the C ABI and generating its launcher, without building: the
Rust entry reader, the calling-convention checks, generic kinds, launch facts,
the expression translator, and that the committed generated files are current."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Literal

import pytest

from nodes.host_builder.abi import DType
from nodes.host_builder.binding import (
    BindingError,
    ExtentKind,
    OperatorBinding,
    bind_operator,
    fact_value,
    plan_for,
)
from nodes.host_builder.ffi_gen import generate_operator_rs
from nodes.host_builder.library import CHECKOUT, stale_generated
from nodes.host_builder.rust_entry import RustSourceError, parse_kernel_source
from nodes.host_builder.rust_expr import Kind, TranspileError, Transpiler, Variable
from schemas.gpu import LiteralDispatch
from schemas.port_spec import PortSpec, ResolvedArray, load_port_spec
from toolchain.env import REPO_ROOT
from toolchain.reference_export import launch_facts

SPEC = REPO_ROOT / "examples" / "kernels" / "softmax.port.yaml"


def _kernel(tmp_path: Path, generics: str, params: str, body: str = "") -> Path:
    path = tmp_path / "kernel.rs"
    path.write_text(
        "#[cutile::module]\npub mod softmax_port {\n    use cutile::core::*;\n\n"
        f"    #[cutile::entry()]\n    unsafe fn softmax_kernel{generics}({params}) {{\n"
        f"        {body}\n    }}\n}}\n",
        encoding="utf-8",
    )
    return path


GENERIC_PARAMS = (
    "x: *mut E, x_rows: i32, x_cols: i32, x_row_stride: i32, x_col_stride: i32, "
    "y: *mut E, y_rows: i32, y_cols: i32, y_row_stride: i32, y_col_stride: i32"
)


def test_reads_the_hand_port() -> None:
    module = parse_kernel_source(CHECKOUT.src_dir / "softmax.rs")
    entry = module.entry("softmax_kernel")
    assert module.module == "softmax_port"
    assert [g.name for g in entry.generics] == ["TILE_N", "COLS_DIV"]
    assert entry.param("x").pointee == "f32"
    literal = {(a.param, a.literal) for a in entry.assumptions if a.literal}
    assert ("x", 16) in literal and ("x_row_stride", 4) in literal
    assert any(a.param == "x_cols" and a.divisor == "COLS_DIV" for a in entry.assumptions)


def test_hand_port_binding_and_plans() -> None:
    spec = load_port_spec(SPEC)
    binding = bind_operator(
        spec,
        SPEC,
        parse_kernel_source(CHECKOUT.src_dir / "softmax.rs"),
        "crate::softmax::softmax_port",
    )
    assert binding.abi.symbol == "cutile_softmax"
    assert binding.unsupported_dtypes() == {
        "x": ["float16", "bfloat16"],
        "y": ["float16", "bfloat16"],
    }
    variant = binding.variants[0]
    assert [r.kind for r in variant.generics] == ["constant", "fact"]
    assert {(p.array, p.kind, p.divisor) for p in variant.preconditions} >= {
        ("x", "address", 16),
        ("x", "stride", 4),
    }
    ragged = spec.resolve(next(c for c in spec.test_configs if c.name == "ragged_f32"), "test")
    assert plan_for(binding, ragged).generics == (1024, 1)


def test_element_type_generic_dispatches_per_dtype(tmp_path: Path) -> None:
    body = "let a = divisible::<_, X_ALIGN>(pointer_to_tile(x));"
    kernel = _kernel(
        tmp_path,
        "<E: ElementType, const TILE_N: i32, const X_ALIGN: i32>",
        GENERIC_PARAMS,
        body,
    )
    spec = load_port_spec(SPEC)
    binding = bind_operator(spec, SPEC, parse_kernel_source(kernel), "crate::k::softmax_port")
    rules = {r.name: r for r in binding.variants[0].generics}
    assert rules["E"].kind == "element" and rules["E"].arrays == ("x", "y")
    assert rules["X_ALIGN"].extent is ExtentKind.ADDRESS
    assert binding.unsupported_dtypes() == {}
    text = generate_operator_rs(binding)
    # One launch for every dtype: the element type travels in the generic arguments,
    # a pointer as its address; the entry is compiled without launch-time hints (G17).
    launch = text[text.index("rt::launch_proven(") :]
    assert launch.split()[:3] == ["rt::launch_proven(", "&SOFTMAX_KERNEL,", "&derived.generics,"]
    assert "rt::param::<u64>(&args.x.data)," in launch
    assert "rt::param::<i32>(&args.x.shape_i32(0))," in launch
    assert "TileKernel" not in text and "Dtype::Float16,) =>" not in text
    assert 'rt::require_same_dtype(&[&args.x, &args.y], "E")?' in text
    assert "rt::address_fact(args.x.data)" in text


def test_a_constant_binds_to_the_generic_of_its_own_name(tmp_path: Path) -> None:
    """The kernel writer names a constant's generic as the source names the constant
    (`generics.generic_name`: `tile_n` stays `tile_n`); the binding finds the constant
    by the same rule, so `tile_n` and `TILE_N` are two constants, a generic each."""
    spec_path = tmp_path / "softmax.port.yaml"
    spec_path.write_text(SPEC.read_text().replace("TILE_N", "tile_n"))
    source = (SPEC.parent / "softmax.py").read_text()
    (tmp_path / "softmax.py").write_text(source.replace("TILE_N", "tile_n"))
    kernel = _kernel(tmp_path, "<E: ElementType, const tile_n: i32>", GENERIC_PARAMS)
    spec = load_port_spec(spec_path)
    binding = bind_operator(spec, spec_path, parse_kernel_source(kernel), "crate::k::p")
    rules = {r.name: r for r in binding.variants[0].generics}
    assert (rules["tile_n"].kind, rules["tile_n"].constant) == ("constant", "tile_n")
    assert 'rt::to_i32(c_tile_n, "tile_n")' in generate_operator_rs(binding)
    # No case folding: an upper-cased generic stands for no constant of this spec.
    upper = _kernel(tmp_path, "<E: ElementType, const TILE_N: i32>", GENERIC_PARAMS)
    with pytest.raises(BindingError, match="const generic TILE_N is neither a spec constant"):
        bind_operator(spec, spec_path, parse_kernel_source(upper), "crate::k::p")
    # Both spellings: two generics, and two launcher variables (numbered, as Rust's
    # locals are lower case).
    spec_path.write_text(
        SPEC.read_text().replace("  TILE_N:\n", "  tile_n: {type: int, default: 64}\n  TILE_N:\n")
    )
    both = _kernel(
        tmp_path, "<E: ElementType, const tile_n: i32, const TILE_N: i32>", GENERIC_PARAMS
    )
    binding = bind_operator(
        load_port_spec(spec_path), spec_path, parse_kernel_source(both), "crate::k::p"
    )
    rules = {r.name: r for r in binding.variants[0].generics}
    assert (rules["tile_n"].constant, rules["TILE_N"].constant) == ("tile_n", "TILE_N")
    text = generate_operator_rs(binding)
    assert 'rt::to_i32(c_tile_n_0, "tile_n")' in text
    assert 'rt::to_i32(c_tile_n_1, "TILE_N")' in text


def test_literal_entries_of_one_variant_are_chosen_by_their_constants(tmp_path: Path) -> None:
    """Two entries specialised to TILE_N = 1024 and 2048: each configuration launches
    the one its constants match; one they match neither is refused, by the Python
    plan and by the generated launcher alike."""
    params = GENERIC_PARAMS.replace("E", "f32")
    kernel = tmp_path / "kernel.rs"
    entries = "".join(
        f"    #[cutile::entry()]\n    unsafe fn softmax_kernel_row_tile_n{n}({params}) {{}}\n"
        for n in (1024, 2048)
    )
    kernel.write_text(
        f"#[cutile::module]\npub mod softmax_port {{\n    use cutile::core::*;\n\n{entries}}}\n",
        encoding="utf-8",
    )
    spec = load_port_spec(SPEC)
    literal = [
        LiteralDispatch(
            entry=f"softmax_kernel_row_tile_n{n}", variant="row", constants={"TILE_N": n}
        )
        for n in (1024, 2048)
    ]
    binding = bind_operator(
        spec, SPEC, parse_kernel_source(kernel), "crate::k::softmax_port", None, literal
    )
    assert [(v.index, v.entry, v.literals) for v in binding.variants] == [
        (0, "softmax_kernel_row_tile_n1024", (("TILE_N", 1024),)),
        (1, "softmax_kernel_row_tile_n2048", (("TILE_N", 2048),)),
    ]
    configs = {c.name: spec.resolve(c, p) for c, p in spec.all_configs()}
    assert plan_for(binding, configs["ragged_f32"]).variant == 0  # N 1000: TILE_N 1024
    assert plan_for(binding, configs["pow2_f16"]).variant == 1  # N 2048
    with pytest.raises(BindingError, match="no entry of variant 'row' takes"):
        plan_for(binding, configs["perf_4k_x_4k_f16"])  # TILE_N 4096
    text = generate_operator_rs(binding)
    assert "if c_tile_n == 1024 {" in text and "if c_tile_n == 2048 {" in text
    assert text.count("return Ok(Derived { variant: 1, grid, generics });") == 1
    assert text.rstrip().count("no variant's dispatch condition holds") == 1


def _softmax_passing_tile_n(tmp_path: Path) -> tuple[PortSpec, OperatorBinding]:
    """The softmax example with one configuration binding TILE_N (the caller passes
    it), bound to the library's softmax port."""
    text = SPEC.read_text(encoding="utf-8").replace(
        "{name: ragged_f32, dims: {M: 37, N: 1000}, dtype: float32}",
        "{name: ragged_f32, dims: {M: 37, N: 1000}, dtype: float32, constants: {TILE_N: 2048}}",
    )
    spec_path = tmp_path / "softmax.port.yaml"
    spec_path.write_text(text.replace("source: softmax.py", f"source: {SPEC.parent}/softmax.py"))
    spec = load_port_spec(spec_path)
    binding = bind_operator(
        spec, spec_path, parse_kernel_source(CHECKOUT.src_dir / "softmax.rs"), "crate::s::p"
    )
    return spec, binding


def test_a_constant_the_configurations_bind_is_passed_by_the_caller(tmp_path: Path) -> None:
    """TileGym's hosts choose constants (a block size, an option): a constant some
    configuration binds becomes a C parameter after the scalars, and decides the
    variant and the generics at launch."""
    spec, binding = _softmax_passing_tile_n(tmp_path)
    assert [(a.name, a.dtype, a.constant) for a in binding.scalars] == [
        ("TILE_N", DType.INT64, True)
    ]
    assert "int64_t TILE_N" in binding.abi.c_declarations()[0]
    ragged = spec.resolve(next(c for c in spec.test_configs if c.name == "ragged_f32"), "test")
    assert ragged.argument("TILE_N") == 2048
    assert plan_for(binding, ragged).generics == (2048, 1)  # the passed value, not next_pow2
    rust = generate_operator_rs(binding)
    assert "let c_tile_n: i64 = i64::from(args.s_tile_n);" in rust


def test_a_passed_constant_the_entry_holds_must_be_the_callers(tmp_path: Path) -> None:
    """An entry holding TILE_N as a literal (2048, the value it was proven with) is
    not taken by a call passing another TILE_N: the Python plan and the generated
    launcher both go on to the next variant, here none."""
    spec, bound = _softmax_passing_tile_n(tmp_path)
    binding = replace(
        bound, variants=tuple(replace(v, held=(("TILE_N", 2048),)) for v in bound.variants)
    )
    configs = {c.name: spec.resolve(c, p) for c, p in spec.all_configs()}
    assert plan_for(binding, configs["ragged_f32"]).variant == 0  # passes 2048
    assert plan_for(binding, configs["pow2_f16"]).variant == 0  # next_pow2(2048) = 2048
    with pytest.raises(BindingError, match="no entry of variant 'row' takes"):
        plan_for(binding, configs["perf_4k_x_4k_f16"])  # passes 4096
    rust = generate_operator_rs(binding)
    assert "(i64::from(args.s_tile_n) == 2048i64)" in rust
    assert "no variant's dispatch condition holds" in rust


@pytest.mark.parametrize(
    ("generics", "params", "message"),
    [
        ("<const TILE_N: i32>", "x: *mut f32, y: *mut f32", "takes 2 parameters"),
        (
            "<const TILE_N: i32>",
            GENERIC_PARAMS.replace("x: *mut E", "x: i32").replace("*mut E", "*mut f32"),
            "should be a raw pointer",
        ),
        ("<const TILE_N: i32, const MYSTERY: i32>", GENERIC_PARAMS.replace("E", "f32"), "MYSTERY"),
        ("<const TILE_N: i32>", GENERIC_PARAMS.replace("E", "u8"), "takes none of the spec"),
        (
            "<const TILE_N: i32>",
            GENERIC_PARAMS.replace("E", "f32").replace("x_rows: i32", "x_rows: i64"),
            "must be i32",
        ),
    ],
    ids=["too few parameters", "not a pointer", "unknown generic", "no dtype", "i64 extent"],
)
def test_binding_refuses_what_it_cannot_launch(
    tmp_path: Path, generics: str, params: str, message: str
) -> None:
    kernel = _kernel(tmp_path, generics, params)
    with pytest.raises(BindingError, match=message):
        bind_operator(load_port_spec(SPEC), SPEC, parse_kernel_source(kernel), "crate::k::m")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("def softmax_kernel(", "def renamed_kernel("), "defines no function 'softmax_kernel'"),
        (
            ("def softmax_kernel(", "def softmax_kernel(\n    extra,"),
            r"\['extra'\] are not declared",
        ),
    ],
    ids=["no such kernel", "undeclared parameter"],
)
def test_reference_parameters_the_spec_does_not_declare_are_refused(
    tmp_path: Path, edit: tuple[str, str], message: str
) -> None:
    """The C ABI follows the reference kernel's parameters: the binding stops, naming the
    parameter, where the source and the spec disagree."""
    source = (SPEC.parent / "softmax.py").read_text(encoding="utf-8")
    assert edit[0] in source
    (tmp_path / "softmax.py").write_text(source.replace(*edit), encoding="utf-8")
    spec_path = tmp_path / "softmax.port.yaml"
    spec_path.write_text(SPEC.read_text(encoding="utf-8"), encoding="utf-8")
    kernel = parse_kernel_source(CHECKOUT.src_dir / "softmax.rs")
    with pytest.raises(BindingError, match=message):
        bind_operator(load_port_spec(spec_path), spec_path, kernel, "crate::s::p")


def test_source_without_entry_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "kernel.rs"
    path.write_text("#[cutile::module]\npub mod m {\n    fn helper() {}\n}\n", encoding="utf-8")
    with pytest.raises(RustSourceError, match="no #\\[cutile::entry\\]"):
        parse_kernel_source(path)


DTypeName = Literal["float16", "bfloat16", "float32", "int8", "float64"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int8", "float64"])
@pytest.mark.parametrize(
    ("shape", "strides", "offset"),
    [
        ([37, 1000], [1000, 1], 0),
        ([129, 781], [781, 1], 0),
        ([64, 48], [1, 64], 3),
        ([8, 8], [16, 1], 4),
    ],
)
def test_launch_facts_agree_with_the_reference_export(
    dtype: DTypeName, shape: list[int], strides: list[int], offset: int
) -> None:
    """The launcher derives fact generics with the analyzer's rule for a cuTile launch."""
    array = ResolvedArray(
        dtype=dtype, shape=shape, strides=strides, storage_offset=offset, role="in"
    )
    facts = launch_facts(array)
    itemsize = {"int8": 1, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}[dtype]
    for dim in range(len(shape)):
        assert fact_value(ExtentKind.SHAPE, shape[dim], itemsize) == facts.shape_divisible_by[dim]
        assert (
            fact_value(ExtentKind.STRIDE, strides[dim], itemsize) == facts.stride_divisible_by[dim]
        )
    address = fact_value(ExtentKind.ADDRESS, offset * itemsize, itemsize)
    assert address == facts.base_addr_divisible_by


def _transpiler() -> Transpiler:
    return Transpiler(
        {
            "N": Variable("d_n", Kind.INT),
            "dtype": Variable("dtype", Kind.DTYPE),
            "scale": Variable("s_scale", Kind.FLOAT),
        }
    )


@pytest.mark.parametrize(
    ("text", "want", "code"),
    [
        ("next_pow2(N)", Kind.INT, "rt::next_pow2(d_n)?"),
        ("cdiv(N, 128)", Kind.INT, "rt::cdiv(d_n, 128i64)?"),
        ("N // 2 % 3", Kind.INT, "rt::modulo(rt::floordiv(d_n, 2i64)?, 3i64)?"),
        ("min(N, 64, 8)", Kind.INT, "d_n.min(64i64).min(8i64)"),
        ("dtype == 'float16'", Kind.BOOL, "(dtype == Dtype::Float16)"),
        ("1 < N <= 4096", Kind.BOOL, "((1i64 < d_n) && (d_n <= 4096i64))"),
        ("64 if N > 1024 else 32", Kind.INT, "(if d_n > 1024i64 { 64i64 } else { 32i64 })"),
        ("-3 * N", Kind.INT, "rt::mul(-3i64, d_n)?"),
        ("-N", Kind.INT, "rt::sub(0, d_n)?"),
        ("N / 2", Kind.FLOAT, "rt::true_div(d_n as f64, 2i64 as f64)?"),
        ("scale * N", Kind.FLOAT, "(s_scale * (d_n as f64))"),
        ("True", Kind.BOOL, "true"),
    ],
)
def test_expressions_translate_with_python_semantics(text: str, want: Kind, code: str) -> None:
    assert _transpiler().expression(text, want) == code


@pytest.mark.parametrize(
    ("text", "want", "message"),
    [
        ("M + 1", Kind.INT, "unknown name 'M'"),
        ("dtype + 1", Kind.INT, "not a number"),
        ("dtype < 'float16'", Kind.BOOL, "== or !="),
        ("dtype == 'float17'", Kind.BOOL, "not a dtype name"),
        ("N / 2", Kind.INT, "gives float"),
        ("N and True", Kind.BOOL, "non-booleans"),
    ],
)
def test_untranslatable_expressions_are_refused(text: str, want: Kind, message: str) -> None:
    with pytest.raises(TranspileError, match=message):
        _transpiler().expression(text, want)


def test_dtype_codes_are_stable() -> None:
    assert DType.FLOAT32.value == 12
    assert DType.from_spec_name("bfloat16") is DType.BFLOAT16


def test_committed_generated_files_are_current() -> None:
    """Every generated file equals what the manifest generates now: no hand edits, no
    generator change left unapplied (`python -m nodes.host_builder regenerate`)."""
    assert stale_generated(CHECKOUT) == []


def test_generated_wrapper_is_lint_clean() -> None:
    """The wrapper is generated already formatted and lint-clean, as ruff sees it."""
    wrapper = REPO_ROOT / "kernels_rs" / "ported" / "python" / "tileport_kernels.py"
    for command in (["format", "--check"], ["check"]):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *command, str(wrapper)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
