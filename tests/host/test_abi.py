"""The C ABI of the built library, through cffi, on a machine without a GPU.

Every error path returns its own status. Any CUDA call on this machine would
fail with DEVICE (there is no driver), so a call that returns, say, BAD_STRIDE
proves its checks ran before any CUDA call. The host-pointer case is the one
that reaches the device check, and it must say DEVICE, not crash.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from nodes.host_builder import abi
from nodes.host_builder.abi import DType, Status
from nodes.host_builder.binding import OperatorBinding, plan_for
from schemas.port_spec import load_port_spec

ROWS, COLS = 37, 1000
GOOD_X = 0x7F00_0000_0000
GOOD_Y = 0x7F00_1000_0000


def _tensor(
    library: Any,
    *,
    data: int = GOOD_X,
    dtype: int = DType.FLOAT32,
    shape: tuple[int, ...] = (ROWS, COLS),
    strides: tuple[int, ...] | None = None,
    ndim: int | None = None,
) -> Any:
    cdata = library.ffi.new("tileport_tensor_t *")
    cdata.data = data
    cdata.dtype = int(dtype)
    cdata.ndim = len(shape) if ndim is None else ndim
    strides = strides if strides is not None else (shape[-1], 1)[-len(shape) :]
    for dim, extent in enumerate(shape[: abi.MAX_RANK]):
        cdata.shape[dim] = extent
    for dim, stride in enumerate(strides[: abi.MAX_RANK]):
        cdata.strides[dim] = stride
    return cdata


def _launch(library: Any, x: Any, y: Any) -> int:
    return int(library.lib.cutile_softmax(x, y, library.ffi.NULL))


def _plan(library: Any, x: Any, y: Any) -> int:
    plan = library.ffi.new("tileport_plan_t *")
    return int(library.lib.cutile_softmax_plan(x, y, 132, plan))


def test_layout_matches_the_cdef(library: Any) -> None:
    """The Rust structs have exactly the size, alignment and field offsets cffi
    computes from the cdef."""
    ffi, lib = library.ffi, library.lib
    assert lib.tileport_abi_version() == abi.ABI_VERSION
    query = lib.tileport_abi_query
    assert query(abi.QueryKey.MAX_RANK) == abi.MAX_RANK
    assert query(abi.QueryKey.MAX_GENERICS) == abi.MAX_GENERICS
    for struct, size_key, align_key in (
        (abi.TENSOR_STRUCT, abi.QueryKey.TENSOR_SIZE, abi.QueryKey.TENSOR_ALIGN),
        (abi.PLAN_STRUCT, abi.QueryKey.PLAN_SIZE, abi.QueryKey.PLAN_ALIGN),
    ):
        assert query(size_key) == ffi.sizeof(struct.c_name)
        assert query(align_key) == ffi.alignof(struct.c_name)
        base = abi.FIELD_OFFSET_BASE[struct.c_name]
        for index, field in enumerate(struct.fields):
            assert query(base + index) == ffi.offsetof(struct.c_name, field.name), field.name
    assert query(9999) == -1


def test_library_carries_the_wrappers_cdef(library: Any, wrapper: ModuleType) -> None:
    assert library.lib.tileport_abi_fingerprint() == wrapper.FINGERPRINT
    built_cdef = library.ffi.string(library.lib.tileport_cdef()).decode()
    assert built_cdef == wrapper.CDEF
    assert abi.fingerprint(wrapper.CDEF) == wrapper.FINGERPRINT


def test_codes_are_distinct_and_declared_in_the_cdef(wrapper: ModuleType) -> None:
    assert len({s.value for s in Status}) == len(Status)
    assert all(s.value < 0 for s in Status if s is not Status.OK)
    for status in Status:
        assert f"TILEPORT_{status.name} = {status.value}" in wrapper.CDEF


def test_a_valid_call_plans_without_cuda(library: Any, softmax_binding: OperatorBinding) -> None:
    plan = library.ffi.new("tileport_plan_t *")
    x, y = _tensor(library), _tensor(library, data=GOOD_Y)
    assert library.lib.cutile_softmax_plan(x, y, 132, plan) == Status.OK
    assert list(plan.grid) == [ROWS, 1, 1]
    spec = load_port_spec(softmax_binding.spec_path)
    ragged = spec.resolve(next(c for c in spec.test_configs if c.name == "ragged_f32"), "test")
    expected = plan_for(softmax_binding, ragged).generics
    assert tuple(plan.generics)[: plan.num_generics] == expected


NULL = object()

ERROR_CASES: list[tuple[str, dict[str, Any], dict[str, Any], Status, str]] = [
    ("null x", {"null": True}, {}, Status.NULL_DESCRIPTOR, "`x` is null"),
    ("null y", {}, {"null": True}, Status.NULL_DESCRIPTOR, "`y` is null"),
    ("dtype code 0", {"dtype": 0}, {}, Status.UNKNOWN_DTYPE, "dtype code 0"),
    ("dtype code 99", {}, {"dtype": 99}, Status.UNKNOWN_DTYPE, "dtype code 99"),
    (
        "float64 not in the spec",
        {"dtype": DType.FLOAT64},
        {"dtype": DType.FLOAT64},
        Status.UNSUPPORTED_DTYPE,
        "float64",
    ),
    ("mixed dtypes", {}, {"dtype": DType.FLOAT64}, Status.UNSUPPORTED_DTYPE, "float64"),
    (
        "rank 3",
        {"shape": (2, ROWS, COLS), "strides": (ROWS * COLS, COLS, 1)},
        {},
        Status.BAD_RANK,
        "ndim 3",
    ),
    ("rank 1", {}, {"shape": (COLS,), "strides": (1,)}, Status.BAD_RANK, "ndim 1"),
    ("ndim beyond MAX_RANK", {"ndim": 9}, {}, Status.BAD_RANK, "ndim 9"),
    ("negative ndim", {"ndim": -1}, {}, Status.BAD_RANK, "ndim -1"),
    ("negative extent", {"shape": (-1, COLS)}, {}, Status.BAD_SHAPE, "shape[0]"),
    ("extent above i32", {"shape": (2**31, COLS)}, {}, Status.BAD_SHAPE, "i32::MAX"),
    ("rows disagree", {}, {"shape": (ROWS + 1, COLS)}, Status.BAD_SHAPE, "M = 37"),
    ("columns disagree", {}, {"shape": (ROWS, COLS - 1)}, Status.BAD_SHAPE, "N = 1000"),
    ("non-unit last stride", {"strides": (2 * COLS, 2)}, {}, Status.BAD_STRIDE, "unit stride"),
    ("negative stride", {}, {"strides": (-COLS, 1)}, Status.BAD_STRIDE, "strides[0]"),
    ("stride above i32", {"strides": (2**31, 1)}, {}, Status.BAD_STRIDE, "i32::MAX"),
    ("misaligned base", {"data": GOOD_X + 4}, {}, Status.MISALIGNED, "16-byte"),
]


@pytest.mark.parametrize(
    ("x_args", "y_args", "expected", "message"),
    [case[1:] for case in ERROR_CASES],
    ids=[case[0] for case in ERROR_CASES],
)
def test_error_paths_return_their_status(
    library: Any, x_args: dict[str, Any], y_args: dict[str, Any], expected: Status, message: str
) -> None:
    def build(args: dict[str, Any], default_data: int) -> Any:
        if args.get("null"):
            return library.ffi.NULL
        return _tensor(library, **{"data": default_data, **args})

    x, y = build(x_args, GOOD_X), build(y_args, GOOD_Y)
    assert _launch(library, x, y) == expected
    assert message in library.last_error()
    # The plan runs the same checks, and never any CUDA call.
    assert _plan(library, x, y) == expected


def test_every_literal_precondition_is_enforced(
    library: Any, softmax_binding: OperatorBinding
) -> None:
    """Each divisibility the port's kernel states as a literal refuses an argument that
    breaks it (MISALIGNED), before any CUDA call."""
    for pre in softmax_binding.variants[0].preconditions:
        args: dict[str, Any] = {}
        if pre.kind == "address":
            args["data"] = GOOD_X + 4
        elif pre.kind == "stride" and pre.dim == 0:
            args["strides"] = (COLS + 1, 1)
        else:
            continue
        plain = _tensor(library, data=GOOD_Y)
        broken = _tensor(library, **{"data": GOOD_X, **args})
        pair = (broken, plain) if pre.array == "x" else (plain, broken)
        assert _plan(library, *pair) == Status.MISALIGNED, pre


def test_host_pointer_is_a_device_error(library: Any) -> None:
    """Real host memory passes every descriptor check; the device check refuses it
    (here: no driver at all; on a GPU machine: not device memory)."""
    host_x = library.ffi.new("float[]", ROWS * COLS + 4)
    host_y = library.ffi.new("float[]", ROWS * COLS + 4)
    x_address = _aligned(int(library.ffi.cast("uintptr_t", host_x)))
    y_address = _aligned(int(library.ffi.cast("uintptr_t", host_y)))
    x, y = _tensor(library, data=x_address), _tensor(library, data=y_address)
    assert _plan(library, x, y) == Status.OK
    assert _launch(library, x, y) == Status.DEVICE
    assert "CUDA" in library.last_error()


def test_null_data_pointer_is_a_device_error_and_empty_tensors_are_fine(library: Any) -> None:
    x, y = _tensor(library, data=0), _tensor(library, data=0)
    assert _launch(library, x, y) == Status.DEVICE
    empty_x = _tensor(library, data=0, shape=(0, COLS))
    empty_y = _tensor(library, data=0, shape=(0, COLS))
    plan = library.ffi.new("tileport_plan_t *")
    assert library.lib.cutile_softmax_plan(empty_x, empty_y, 132, plan) == Status.OK
    assert list(plan.grid) == [0, 0, 0]


def test_null_plan_pointer_is_refused(library: Any) -> None:
    x, y = _tensor(library), _tensor(library, data=GOOD_Y)
    status = library.lib.cutile_softmax_plan(x, y, 132, library.ffi.NULL)
    assert status == Status.NULL_DESCRIPTOR


def test_a_panic_never_crosses_the_boundary(
    library: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    assert library.lib.tileport_selftest_panic() == Status.PANIC
    assert "deliberate panic" in library.last_error()
    # Expected, so not printed: a successful conversion's log shows no panic.
    assert "panicked" not in capfd.readouterr().err


def test_the_disk_cache_of_compiled_kernels_is_per_user(
    library: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off until asked; asked without a per-user cache directory it refuses (never a
    shared temporary one); with one it makes it private to the user."""
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert library.lib.tileport_enable_disk_cache() == Status.LAUNCH
    assert "no per-user cache directory" in library.last_error()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    library.enable_disk_cache()
    kernels = tmp_path / "cutile" / "kernels"
    assert kernels.is_dir() and kernels.stat().st_mode & 0o777 == 0o700


def test_last_error_is_truncated_safely(library: Any) -> None:
    _launch(library, library.ffi.NULL, _tensor(library))
    buffer = library.ffi.new("char[]", 8)
    full = library.lib.tileport_last_error(buffer, 8)
    assert full > 8
    assert len(library.ffi.string(buffer)) == 7


def _aligned(address: int) -> int:
    return (address + 15) // 16 * 16
