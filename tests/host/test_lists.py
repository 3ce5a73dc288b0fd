"""A list-of-arrays parameter through the host builder: the binding reads the
table's columns, the launcher checks every element and the table, and the
wrapper passes the list as the C ABI takes it (element descriptors, length,
table). The cffi tests run against `list_library` (conftest), a library holding
only `pick_rows`, on a machine without a GPU: a status other than DEVICE proves
the check ran before any CUDA call."""

from __future__ import annotations

import gc
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from nodes.correctness.runner import library_in_module
from nodes.host_builder.abi import DType, Status
from nodes.host_builder.abi_checks import AbiProber
from nodes.host_builder.binding import (
    BindingError,
    ExtentKind,
    OperatorBinding,
    bind_operator,
    divisibility,
    fact_value,
    launch_hints,
    plan_for,
)
from nodes.host_builder.ffi_gen import generate_operator_rs
from nodes.host_builder.library import library_arrays
from nodes.host_builder.rust_entry import ColumnAssumption, parse_kernel_source, table_reads
from schemas.port_spec import ITEMSIZE, load_port_spec

DATA = Path(__file__).parent / "data"
LIST_SPEC = DATA / "pick_rows.port.yaml"
LIST_KERNEL = DATA / "pick_rows.rs"
MODULE = "crate::ffi::kernels::pick_rows::pick_rows_port"
ListLibrary = Any  # conftest.ListLibrary: binding, wrapper, library, crate
ROWS, COLS = 32, 256  # each element's (R, N)
ARRAYS = 4  # L
COLUMNS = 5  # 1 + 2 * rank
ELEMENT = 0x7F00_0000_0000
ELEMENT_STEP = 0x10_0000
OUT = 0x7F00_1000_0000
TABLE = 0x7E00_0000_0000


def _bind(kernel: Path = LIST_KERNEL) -> OperatorBinding:
    return bind_operator(load_port_spec(LIST_SPEC), LIST_SPEC, parse_kernel_source(kernel), MODULE)


def _kernel_with(tmp_path: Path, old: str, new: str) -> Path:
    text = LIST_KERNEL.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "pick_rows.rs"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


# --- binding, without building -----------------------------------------------------------


def test_the_list_binds_its_length_elements_and_table() -> None:
    binding = _bind()
    tables, out = binding.arrays
    assert tables.is_list and not out.is_list
    assert tables.length is not None and tables.length.binds == "L"
    assert [rule.binds for rule in tables.dims] == ["R", "N"]
    assert binding.bound_symbols == ["L", "R", "N"]
    assert library_arrays(binding)[0].list_length == "L"
    assert library_arrays(binding)[1].list_length is None
    launch, plan = binding.abi.c_declarations()
    params = (
        "const tileport_tensor_t *tables,\n    int32_t tables_len,\n"
        "    const tileport_tensor_t *tables_table,\n    const tileport_tensor_t *out,"
    )
    assert params in launch and params in plan


def test_element_facts_are_generics_of_the_list_and_literals_preconditions() -> None:
    variant = _bind().variants[0]
    rules = {rule.name: rule for rule in variant.generics}
    assert rules["E"].kind == "element" and rules["E"].arrays == ("tables", "out")
    expected = {
        "TABLES_SHAPE_0_DIV": (ExtentKind.SHAPE, 0),
        "TABLES_SHAPE_1_DIV": (ExtentKind.SHAPE, 1),
        "TABLES_STRIDE_0_DIV": (ExtentKind.STRIDE, 0),
    }
    for name, (extent, dim) in expected.items():
        assert (rules[name].kind, rules[name].array) == ("fact", "tables"), name
        assert (rules[name].extent, rules[name].dim) == (extent, dim), name
    assert {(p.array, p.kind, p.dim, p.divisor) for p in variant.preconditions} == {
        ("tables", "address", None, 16),
        ("out", "address", None, 16),
    }
    assert variant.allowed_dtypes["tables"] == (DType.FLOAT16, DType.FLOAT32)


def test_the_tracer_follows_lets_from_the_table_to_its_columns() -> None:
    body = """
        let t: PointerTile<*mut i64, { [] }> = pointer_to_tile(t);
        let view: Tensor<i64, { [-1, 5] }> = make_tensor_view(t, s, st, token);
        let parts: Partition<i64, { [1, 8] }> = make_partition_view(&view, shape![1, 8]);
        let (rows, _token): (Tile<i64, { [1, 8] }>, Token) = load_view_raw(&parts, [i, 0i32]);
        let two: Tile<i32, { [] }> = constant(2i32, shape![]);
        let a: Tile<i64, { [1, 1] }> = extract(rows, [zero, 0i32]);
        let b: Tile<i64, { [1, 1] }> = extract(rows, [zero, two]);
        let a: Tile<i64, { [] }> = a.reshape(shape![]);
        let a: PointerTile<*mut f32, { [] }> = int_to_ptr(a);
        let a: PointerTile<*mut f32, { [] }> = assume_div_by::<_, 16>(a);
        let b: Tile<i64, { [] }> = b.reshape(shape![]);
        let b: Tile<i32, { [] }> = trunci_plain_r0(b);
        let b: Tile<i32, { [] }> = divisible::<_, T_SHAPE_1_DIV>(b);
        let two: Tile<i32, { [] }> = constant(4i32, shape![]);
        let c: Tile<i64, { [1, 1] }> = extract(rows, [zero, two]);
        let c: Tile<i32, { [] }> = assume_div_by::<_, 8>(trunci_plain_r0(c));
        let b: Tile<i32, { [] }> = b + b;
        let b: Tile<i32, { [] }> = assume_div_by::<_, 2>(b);
    """
    reads = table_reads(body, {"t"})
    # A nested call is not followed, and `b + b` is a new value, not a column.
    assert reads.assumptions == (
        ColumnAssumption("t", 0, "16"),
        ColumnAssumption("t", 2, "T_SHAPE_1_DIV"),
    )
    assert reads.pointees("t") == {"f32"}
    assert table_reads(body, set()) == table_reads(body, {"view_of_nothing"})
    assert table_reads(body, set()).assumptions == ()
    rebound = body.replace("let b: Tile<i64, { [1, 1] }> = extract(rows, [zero, two]);", "")
    rebound = rebound.replace("let b: Tile<i64, { [] }> = b.reshape", "let b = other.reshape")
    assert table_reads(rebound, {"t"}).assumptions == (ColumnAssumption("t", 0, "16"),)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("tables: *mut i64", "tables: *mut i32", "should be `\\*mut i64`"),
        ("tables_len: i32", "tables_len: i64", "must be i32"),
        (
            "divisible::<_, TABLES_SHAPE_0_DIV>(narrow)",
            "divisible::<_, TABLES_SHAPE_0_DIV>(narrow_2)",
            "applies it to table column 3",
        ),
        (
            "let ptr: PointerTile<*mut E, { [] }> = int_to_ptr(address);",
            "let ptr: PointerTile<*mut E, { [] }> = int_to_ptr(address);\n"
            "        let other: PointerTile<*mut f32, { [] }> = int_to_ptr(address);",
            "read as several types",
        ),
        ("TABLES_SHAPE_0_DIV", "TABLES_ROWS_DIV", "TABLES_ROWS_DIV"),
    ],
    ids=["table not i64", "length not i32", "fact on another column", "two types", "unknown"],
)
def test_the_binding_refuses_a_list_it_cannot_launch(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    kernel = _kernel_with(tmp_path, old, new)
    with pytest.raises(BindingError, match=message):
        _bind(kernel)


def test_the_launcher_checks_elements_and_writes_the_table() -> None:
    text = generate_operator_rs(_bind())
    for line in (
        'rt::list_arg(tables, tables_len, tables_table, ["tables", "tables_len", '
        '"tables_table"], 2)?',
        "let d_l = tables.len();",
        'tables.require_dim(0, d_r, "R")?;',
        'out.require_dim(0, d_l, "L")?;',
        "args.tables.require_address_divisible(16)?;",
        "Generic::Int(args.tables.shape_fact(0))",
        "Generic::Int(args.tables.stride_fact(0))",
        'rt::require_same_dtype(&[args.tables.first(), &args.out], "E")?;',
        "unsafe { rt::write_tables(&[&args.tables], device, stream)? };",
        "rt::with_lists(&[&args.out], &[&args.tables])",
        "rt::param::<u64>(&args.tables.table.data),",
        "rt::param::<i32>(&args.tables.len_i32()),",
    ):
        assert line in text, line
    # The table is written after every check and the device check, right before launching.
    assert text.index("rt::write_tables") > text.index("rt::launch_grid(derived.grid)")


def test_the_plan_states_each_list_fact_as_a_launch_would() -> None:
    binding = _bind()
    spec = load_port_spec(LIST_SPEC)
    for config in spec.test_configs:
        resolved = spec.resolve(config, "test")
        element = resolved.arrays["tables"]
        itemsize = ITEMSIZE[element.dtype]
        plan = plan_for(binding, resolved)
        facts = dict(
            zip([r.name for r in binding.variants[0].generics], plan.generics, strict=True)
        )
        assert facts["TABLES_SHAPE_0_DIV"] == fact_value(ExtentKind.SHAPE, element.shape[0], 1)
        assert facts["TABLES_SHAPE_1_DIV"] == fact_value(ExtentKind.SHAPE, element.shape[1], 1)
        stride = fact_value(ExtentKind.STRIDE, element.strides[0], itemsize)
        assert facts["TABLES_STRIDE_0_DIV"] == stride
        assert plan.grid[0] == element.list_length
        hints = launch_hints(binding.variants[0], resolved)  # cutile-rs's launcher's, G17
        assert hints["tables"] == 16
        assert hints.get("tables_len", 1) == divisibility(element.list_length or 0)


# --- the built library, through cffi -------------------------------------------------------


@dataclass
class Element:
    data: int
    dtype: int = DType.FLOAT16
    shape: tuple[int, ...] = (ROWS, COLS)
    strides: tuple[int, ...] = (COLS, 1)


@dataclass
class Call:
    """The arguments of one `cutile_pick_rows` call, as plain values."""

    elements: list[Element] = field(
        default_factory=lambda: [Element(ELEMENT + i * ELEMENT_STEP) for i in range(ARRAYS)]
    )
    length: int | None = None
    table: Element | None = None
    out: Element = field(default_factory=lambda: Element(OUT, shape=(ARRAYS, COLS)))
    null: set[str] = field(default_factory=set)

    def arguments(self, ffi: Any) -> list[Any]:
        count = len(self.elements)
        table = self.table or Element(TABLE, DType.INT64, (count, COLUMNS), (COLUMNS, 1))
        elements = ffi.new("tileport_tensor_t[]", max(count, 1))
        for index, element in enumerate(self.elements):
            _set(elements[index], element)
        return [
            ffi.NULL if "elements" in self.null else elements,
            count if self.length is None else self.length,
            ffi.NULL if "table" in self.null else _descriptor(ffi, table),
            _descriptor(ffi, self.out),
        ]


def _set(cdata: Any, element: Element) -> None:
    cdata.data = element.data
    cdata.dtype = int(element.dtype)
    cdata.ndim = len(element.shape)
    for dim, (extent, stride) in enumerate(zip(element.shape, element.strides, strict=True)):
        cdata.shape[dim] = extent
        cdata.strides[dim] = stride


def _descriptor(ffi: Any, element: Element) -> Any:
    cdata = ffi.new("tileport_tensor_t *")
    _set(cdata, element)
    return cdata


def _launch(lists: ListLibrary, call: Call) -> int:
    ffi = lists.library.ffi
    return int(lists.library.lib.cutile_pick_rows(*call.arguments(ffi), ffi.NULL))


def _plan(lists: ListLibrary, call: Call) -> tuple[int, Any]:
    ffi = lists.library.ffi
    plan = ffi.new("tileport_plan_t *")
    status = int(lists.library.lib.cutile_pick_rows_plan(*call.arguments(ffi), 132, plan))
    return status, plan


def _changed(index: int, **changes: Any) -> Call:
    call = Call()
    element = call.elements[index]
    for name, value in changes.items():
        setattr(element, name, value)
    return call


LIST_ERRORS: list[tuple[str, Call, Status, str]] = [
    (
        "null element array",
        Call(null={"elements"}),
        Status.NULL_DESCRIPTOR,
        "element array `tables`",
    ),
    ("null table", Call(null={"table"}), Status.NULL_DESCRIPTOR, "`tables_table` is null"),
    ("no arrays", Call(elements=[], out=Element(OUT, shape=(0, COLS))), Status.BAD_SHAPE, "= 0"),
    ("negative length", Call(length=-1), Status.BAD_SHAPE, "`tables_len` = -1"),
    (
        "element dtype differs from the first",
        _changed(2, dtype=DType.FLOAT32),
        Status.UNSUPPORTED_DTYPE,
        "`tables[2]` is float32 but `tables[0]` is float16",
    ),
    ("element dtype code 0", _changed(1, dtype=0), Status.UNKNOWN_DTYPE, "`tables[1]`"),
    (
        "element of the wrong rank",
        _changed(3, shape=(COLS,), strides=(1,)),
        Status.BAD_RANK,
        "`tables[3]` has ndim 1",
    ),
    (
        "elements disagree on N",
        _changed(1, shape=(ROWS, COLS - 1)),
        Status.BAD_SHAPE,
        "`tables[1].shape[1]` = 255 but N = 256",
    ),
    (
        "elements disagree on R",
        _changed(3, shape=(ROWS + 1, COLS)),
        Status.BAD_SHAPE,
        "`tables[3].shape[0]` = 33 but R = 32",
    ),
    (
        "element not unit-stride",
        _changed(2, strides=(2 * COLS, 2)),
        Status.BAD_STRIDE,
        "`tables[2].strides[1]`",
    ),
    ("element misaligned", _changed(1, data=ELEMENT + 8), Status.MISALIGNED, "`tables[1]` at"),
    (
        "out rows are not L",
        Call(out=Element(OUT, shape=(ARRAYS + 1, COLS))),
        Status.BAD_SHAPE,
        "but L = 4",
    ),
    (
        "table of the wrong shape",
        Call(table=Element(TABLE, DType.INT64, (ARRAYS, COLUMNS + 1), (COLUMNS + 1, 1))),
        Status.BAD_SHAPE,
        "[4, 6]",
    ),
    (
        "table of the wrong dtype",
        Call(table=Element(TABLE, DType.INT32, (ARRAYS, COLUMNS), (COLUMNS, 1))),
        Status.UNSUPPORTED_DTYPE,
        "`tables_table` is int32",
    ),
    (
        "table of the wrong rank",
        Call(table=Element(TABLE, DType.INT64, (ARRAYS * COLUMNS,), (1,))),
        Status.BAD_RANK,
        "`tables_table` has ndim 1",
    ),
    (
        "table rows not contiguous",
        Call(table=Element(TABLE, DType.INT64, (ARRAYS, COLUMNS), (COLUMNS + 3, 1))),
        Status.BAD_STRIDE,
        "rows must be contiguous",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("call", "expected", "message"),
    [case[1:] for case in LIST_ERRORS],
    ids=[case[0] for case in LIST_ERRORS],
)
def test_list_error_paths_return_their_status(
    list_library: ListLibrary, call: Call, expected: Status, message: str
) -> None:
    assert _launch(list_library, call) == expected
    assert message in list_library.library.last_error()
    # The plan runs the same checks.
    assert _plan(list_library, call)[0] == expected


@pytest.mark.slow
def test_a_valid_list_reaches_the_device_check(list_library: ListLibrary) -> None:
    """Fake device addresses pass every check; the device check is the first CUDA call
    (here: no driver), and the table is written only after it."""
    assert _plan(list_library, Call())[0] == Status.OK
    assert _launch(list_library, Call()) == Status.DEVICE


@pytest.mark.slow
def test_a_list_fact_is_the_weakest_of_its_elements(list_library: ListLibrary) -> None:
    names = [rule.name for rule in list_library.binding.variants[0].generics]
    stride_fact = names.index("TABLES_STRIDE_0_DIV")
    status, plan = _plan(list_library, Call())
    assert status == Status.OK and plan.generics[stride_fact] == 8  # 512-byte rows
    # One element with 520-byte rows: the list states nothing about its row stride.
    status, plan = _plan(list_library, _changed(2, strides=(COLS + 4, 1)))
    assert status == Status.OK and plan.generics[stride_fact] == 1
    assert list(plan.grid) == [ARRAYS, 2, 1]


@pytest.mark.slow
def test_stage_d_probes_and_plans_pass_for_a_list(list_library: ListLibrary) -> None:
    prober = AbiProber(list_library.library, list_library.binding)
    spec = load_port_spec(LIST_SPEC)
    checks = prober.run_error_probes(spec.resolve(spec.test_configs[0], "test"))
    cases = {check.case for check in checks}
    assert {
        "list: null element array",
        "list: element dtype differs from the first",
        "list: table of the wrong shape",
        "host pointer",
    } <= cases
    assert [c.case for c in checks if not c.passed] == []
    plans = prober.plan_checks(spec)
    assert len(plans) == len(spec.test_configs)
    assert [p.detail for p in plans if not p.passed] == []


# --- the wrapper ---------------------------------------------------------------------------


def _descriptors(wrapper: ModuleType, count: int = ARRAYS, **changes: Any) -> list[Any]:
    fields: dict[str, Any] = {"dtype": "float16", "shape": (ROWS, COLS)}
    fields.update(changes)
    return [
        wrapper.TensorDescriptor.contiguous(
            ELEMENT + i * ELEMENT_STEP, fields["dtype"], fields["shape"]
        )
        for i in range(count)
    ]


def _out(wrapper: ModuleType, rows: int = ARRAYS, dtype: str = "float16") -> Any:
    return wrapper.TensorDescriptor.contiguous(OUT, dtype, (rows, COLS))


def _table(wrapper: ModuleType, rows: int = ARRAYS, columns: int = COLUMNS) -> Any:
    return wrapper.TensorDescriptor.contiguous(TABLE, "int64", (rows, columns))


@pytest.mark.slow
def test_the_wrapper_plans_a_list(list_library: ListLibrary) -> None:
    wrapper, library = list_library.wrapper, list_library.library
    spec = load_port_spec(LIST_SPEC)
    resolved = spec.resolve(spec.test_configs[0], "test")
    expected = plan_for(list_library.binding, resolved)
    plan = library.plan("pick_rows", (_descriptors(wrapper), _out(wrapper)))
    assert plan == wrapper.Plan(variant=0, grid=expected.grid, generics=expected.generics)


@pytest.mark.slow
def test_the_wrapper_passes_a_list_with_its_table(list_library: ListLibrary) -> None:
    wrapper, library = list_library.wrapper, list_library.library
    arguments = (wrapper.TensorList(_descriptors(wrapper), _table(wrapper)), _out(wrapper))
    with pytest.raises(wrapper.TileportDeviceError) as caught:
        library.call("pick_rows", arguments)
    assert caught.value.status == Status.DEVICE
    assert library._checked == {}  # a list's call is never cached


@pytest.mark.slow
@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (
            lambda w: (_descriptors(w)[:2] + _descriptors(w, 2, dtype="float32"), _out(w)),
            "TileportDtypeError",
            "share one dtype",
        ),
        (lambda w: ([], _out(w, 0)), "TileportShapeError", "at least one array"),
        (lambda w: (_descriptors(w), _out(w, ARRAYS + 1)), "TileportShapeError", "L = 4"),
        (
            lambda w: (_descriptors(w)[:3] + _descriptors(w, 1, shape=(ROWS, 8)), _out(w)),
            "TileportShapeError",
            "`tables[3].shape[1]` = 8 but N = 256",
        ),
        (
            lambda w: (w.TensorList(_descriptors(w), _table(w, ARRAYS, 6)), _out(w)),
            "TileportShapeError",
            "(4, 5)",
        ),
        (lambda w: (_descriptors(w), _out(w)), "TypeError", "TensorList"),
        (lambda w: (_descriptors(w)[0], _out(w)), "TypeError", "sequence of tensors"),
    ],
    ids=["mixed dtypes", "empty", "L disagrees", "N disagrees", "table shape", "no torch", "one"],
)
def test_the_wrapper_checks_a_list_before_the_c_call(
    list_library: ListLibrary, build: Any, error: str, message: str
) -> None:
    wrapper = list_library.wrapper
    expected = TypeError if error == "TypeError" else getattr(wrapper, error)
    with pytest.raises(expected, match=re.escape(message)) as caught:
        list_library.library.call("pick_rows", build(wrapper))
    assert getattr(caught.value, "status", None) is None


@dataclass
class FakeTensor:
    """Duck-typed like a torch CUDA tensor: what the wrapper reads."""

    address: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    device: Any

    def data_ptr(self) -> int:
        return self.address

    def stride(self) -> tuple[int, ...]:
        return self.strides


@pytest.mark.slow
def test_the_wrapper_allocates_the_table_with_torch(
    list_library: ListLibrary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain sequence of torch tensors gets an int64 (len, 1 + 2 * rank) table on the
    first element's device, from torch, for each call."""
    device = SimpleNamespace(type="cuda", index=0)
    allocated: list[tuple[Any, ...]] = []

    def empty(shape: tuple[int, int], *, dtype: str, device: Any) -> FakeTensor:
        allocated.append((shape, dtype, device))
        return FakeTensor(TABLE, "torch.int64", shape, (shape[1], 1), device)

    class Stream:
        pass

    fake_torch = SimpleNamespace(
        empty=empty,
        int64="torch.int64",
        cuda=SimpleNamespace(
            Stream=Stream, current_stream=lambda d: SimpleNamespace(cuda_stream=0)
        ),
        _C=SimpleNamespace(_cuda_getCurrentRawStream=lambda index: 0),
    )
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    elements = [
        FakeTensor(ELEMENT + i * ELEMENT_STEP, "torch.float16", (ROWS, COLS), (COLS, 1), device)
        for i in range(ARRAYS)
    ]
    out = FakeTensor(OUT, "torch.float16", (ARRAYS, COLS), (COLS, 1), device)
    wrapper = list_library.wrapper
    for _ in range(2):
        with pytest.raises(wrapper.TileportDeviceError):
            list_library.library.call("pick_rows", (elements, out))
    assert allocated == [((ARRAYS, COLUMNS), "torch.int64", device)] * 2


@dataclass
class IndexedTensor(FakeTensor):
    """A FakeTensor that answers `get_device()` and takes `record_stream` as torch's do:
    the wrapper keys repeated calls on such tensors."""

    streams: list[Any] = field(default_factory=list)

    def get_device(self) -> int:
        return int(self.device.index)

    def record_stream(self, stream: Any) -> None:
        self.streams.append(stream)


class RecordingLib:
    """The loaded library, its table ownership calls recorded on their way through."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.calls: list[tuple[str, int]] = []

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.lib, name)
        if not name.startswith("tileport_table_"):
            return found

        def record(address: int) -> Any:
            self.calls.append((name, address))
            return found(address)

        return record


@pytest.mark.slow
def test_a_repeated_list_call_keeps_its_table_owned_until_it_dies(
    list_library: ListLibrary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lists of torch tensors take the repeated-call path: a second call of the same
    layout, its elements elsewhere, reuses the prepared call and its table (only the
    addresses are rebound). The library is told the table is its own (it then writes
    rows only when they change) and told when the table dies, before its memory can
    be handed out again."""
    device = SimpleNamespace(type="cuda", index=0)
    allocated: list[IndexedTensor] = []

    def empty(shape: tuple[int, int], *, dtype: str, device: Any) -> IndexedTensor:
        allocated.append(IndexedTensor(TABLE, "torch.int64", shape, (shape[1], 1), device))
        return allocated[-1]

    fake_torch = SimpleNamespace(
        empty=empty,
        int64="torch.int64",
        cuda=SimpleNamespace(
            Stream=type("Stream", (), {}),
            ExternalStream=lambda handle, device: ("external", handle),
            current_stream=lambda d: SimpleNamespace(cuda_stream=0),
        ),
        _C=SimpleNamespace(_cuda_getCurrentRawStream=lambda index: 0x5000),
    )
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    library = list_library.library
    recording = RecordingLib(library.lib)
    monkeypatch.setattr(library, "lib", recording)
    monkeypatch.setattr(library, "_raw_stream", None)

    def elements(base: int) -> list[IndexedTensor]:
        return [
            IndexedTensor(base + i * ELEMENT_STEP, "torch.float16", (ROWS, COLS), (COLS, 1), device)
            for i in range(ARRAYS)
        ]

    out = IndexedTensor(OUT, "torch.float16", (ARRAYS, COLS), (COLS, 1), device)
    first, moved = elements(ELEMENT), elements(ELEMENT + 0x100_0000)
    found = library._tensor_layout("pick_rows", (first, out))
    assert found is not None
    key, addresses = found
    assert key[1] == 0x5000 and addresses == [t.address for t in first] + [OUT]
    for tensors in (first, moved):
        with pytest.raises(list_library.wrapper.TileportDeviceError):
            library.call("pick_rows", (tensors, out))
    assert len(allocated) == 1 and allocated[0].streams == [("external", 0x5000)]
    (prepared,) = library._repeated.values()
    assert prepared.addresses == [t.address for t in moved] + [OUT]
    assert recording.calls == [("tileport_table_owned", TABLE)]
    library._repeated.clear()
    library._last_repeated.clear()
    library._checked.clear()
    del prepared, allocated[:]
    gc.collect()
    assert recording.calls[-1] == ("tileport_table_released", TABLE)


def _layout_of(list_library: ListLibrary, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`Library._tensor_layout` of the list operator, torch's current stream stood in."""
    library = list_library.library
    monkeypatch.setattr(library, "_raw_stream", lambda index: 0x5000 + index)
    return lambda arrays: library._tensor_layout("pick_rows", arrays)


@pytest.mark.slow
def test_a_list_layout_needs_torch_tensors_throughout(
    list_library: ListLibrary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anything else in a list (a descriptor, a duck-typed array without `get_device`
    first, an empty list, a TensorList, a CPU tensor) leaves the call to the checked
    path."""
    wrapper = list_library.wrapper
    layout = _layout_of(list_library, monkeypatch)
    device = SimpleNamespace(type="cuda", index=0)
    tensor = IndexedTensor(OUT, "torch.float16", (ARRAYS, COLS), (COLS, 1), device)
    plain = FakeTensor(OUT, "torch.float16", (ARRAYS, COLS), (COLS, 1), device)
    on_host = IndexedTensor(
        OUT, "torch.float16", (ARRAYS, COLS), (COLS, 1), SimpleNamespace(index=-1)
    )
    descriptor = wrapper.TensorDescriptor.contiguous(OUT, "float16", (ARRAYS, COLS))
    assert layout(([tensor, tensor], tensor)) is not None
    assert layout(([tensor, plain], tensor)) is not None  # the first keys the device
    assert layout(([plain, tensor], tensor)) is None
    assert layout(([], tensor)) is None
    assert layout((wrapper.TensorList([tensor], tensor), tensor)) is None
    assert layout(([tensor, descriptor], tensor)) is None
    assert layout(([on_host], tensor)) is None


@pytest.mark.slow
def test_a_list_layout_changes_with_any_member_or_the_split(
    list_library: ListLibrary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repeated-call key of a list call: another dtype, extent or stride of any
    member, or the same tensors split otherwise between two lists, is another layout;
    the same facts at other addresses are the same layout, the addresses apart."""
    layout = _layout_of(list_library, monkeypatch)
    device = SimpleNamespace(type="cuda", index=0)

    def tensor(dtype: str = "torch.float16", shape: tuple[int, ...] = (4, 8)) -> IndexedTensor:
        return IndexedTensor(OUT, dtype, shape, (shape[-1], 1), device)

    a, b, c = tensor(), tensor(), tensor()
    found = layout(([a, b], [c]))
    assert found is not None
    key, addresses = found
    assert key[:2] == ("pick_rows", 0x5000) and addresses == [OUT] * 3
    others = [
        ([a, tensor("torch.float32")], [c]),
        ([a, tensor(shape=(4, 16))], [c]),
        ([a, IndexedTensor(OUT, "torch.float16", (4, 8), (16, 1), device)], [c]),
        ([a], [b, c]),
    ]
    for arrays in others:
        other = layout(arrays)
        assert other is not None and other[0] != key, arrays
    moved = IndexedTensor(OUT + 0x1000, "torch.float16", (4, 8), (8, 1), device)
    again = layout(([a, moved], [c]))
    assert again is not None and again[0] == key and again[1] == [OUT, OUT + 0x1000, OUT]


@pytest.mark.slow
def test_the_library_loaded_again_has_statics_of_its_own(list_library: ListLibrary) -> None:
    """The port's modules beyond its first come from the bundle's library loaded again
    from a copy of its file: its own statics (here: its own last error), so its own
    compiled entries and modules. The copy is gone once loaded; each copy is made once."""
    library = list_library.library
    ctx = SimpleNamespace(library=library, wrapper=list_library.wrapper, library_copies=[])
    ctx.disk_cache = False
    assert library_in_module(ctx, 0) is library  # type: ignore[arg-type]
    third = library_in_module(ctx, 2)  # type: ignore[arg-type]
    again = library_in_module(ctx, 1)  # type: ignore[arg-type]
    assert len({id(library), id(again), id(third)}) == 3
    assert library_in_module(ctx, 1) is again and library_in_module(ctx, 2) is third  # type: ignore[arg-type]
    assert not again.path.exists() and again.path.name == library.path.name
    call, _, message = LIST_ERRORS[0][1:]
    assert _launch(list_library, call) != 0 and message in library.last_error()
    assert again.lib.tileport_selftest_panic() == Status.PANIC
    assert "deliberate panic" in again.last_error()
    assert message in library.last_error()  # the first library's error is its own
