"""The generated cffi wrapper: semantic checks before the C call, C statuses turned
into the matching exceptions, and a library from another cdef refused."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from nodes.host_builder.abi import Status
from nodes.host_builder.binding import OperatorBinding, plan_for
from schemas.port_spec import load_port_spec

ROWS, COLS = 37, 1000


@dataclass
class FakeDevice:
    type: str


@dataclass
class FakeTensor:
    """Duck-typed like a torch tensor: the wrapper reads only these."""

    address: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    device: FakeDevice

    def data_ptr(self) -> int:
        return self.address

    def stride(self) -> tuple[int, ...]:
        return self.strides


class CudaArray:
    """An object with `__cuda_array_interface__` (strides in bytes)."""

    def __init__(self, address: int, typestr: str, shape: tuple[int, ...], strides: Any) -> None:
        self.__cuda_array_interface__ = {
            "data": (address, False),
            "typestr": typestr,
            "shape": shape,
            "strides": strides,
            "version": 3,
        }


def _torch_like(dtype: str = "torch.float32", **changes: Any) -> FakeTensor:
    fields: dict[str, Any] = {
        "address": 0x7F00_0000_0000,
        "dtype": dtype,
        "shape": (ROWS, COLS),
        "strides": (COLS, 1),
        "device": FakeDevice("cuda"),
    }
    fields.update(changes)
    return FakeTensor(**fields)


def test_describes_torch_like_and_interface_objects(wrapper: ModuleType) -> None:
    described = wrapper.describe(_torch_like("torch.bfloat16"), "x")
    assert (described.dtype, described.shape, described.strides) == (
        "bfloat16",
        (ROWS, COLS),
        (COLS, 1),
    )
    strided = wrapper.describe(CudaArray(0x1000, "<f4", (ROWS, COLS), (4 * COLS, 4)), "x")
    assert strided.strides == (COLS, 1)
    dense = wrapper.describe(CudaArray(0x1000, "<f2", (ROWS, COLS), None), "x")
    assert dense.strides == (COLS, 1) and dense.dtype == "float16"


def test_refuses_a_tensor_not_on_a_cuda_device(library: Any, wrapper: ModuleType) -> None:
    cpu = _torch_like(device=FakeDevice("cpu"))
    with pytest.raises(wrapper.TileportDeviceError, match="not on a CUDA device"):
        library.call("softmax", (cpu, _torch_like()))


@pytest.mark.parametrize(
    ("x", "y", "error", "message"),
    [
        (
            {"dtype": "torch.float64"},
            {"dtype": "torch.float64"},
            "TileportDtypeError",
            "the port takes",
        ),
        ({}, {"shape": (ROWS + 1, COLS), "strides": (COLS, 1)}, "TileportShapeError", "M = 37"),
        ({"shape": (COLS,), "strides": (1,)}, {}, "TileportShapeError", "rank 1"),
        ({"strides": (2 * COLS, 2)}, {}, "TileportLayoutError", "never copies"),
        ({"dtype": "torch.complex64"}, {}, "TileportDtypeError", "unknown to the ABI"),
    ],
    ids=["dtype not taken", "rows disagree", "wrong rank", "not contiguous", "unknown dtype"],
)
def test_semantic_checks_raise_before_the_c_call(
    library: Any,
    wrapper: ModuleType,
    x: dict[str, Any],
    y: dict[str, Any],
    error: str,
    message: str,
) -> None:
    """These arguments point at no device memory: had they reached the C side, the
    error would be DEVICE. The wrapper's own exception proves it stopped them first."""
    with pytest.raises(getattr(wrapper, error), match=message) as caught:
        library.call("softmax", (_torch_like(**x), _torch_like(address=0x7F00_1000_0000, **y)))
    assert caught.value.status is None


def test_c_statuses_become_exceptions(library: Any, wrapper: ModuleType) -> None:
    """Valid arguments at a host address pass the wrapper; the C side says DEVICE."""
    host = library.ffi.new("float[]", ROWS * COLS + 8)
    address = (int(library.ffi.cast("uintptr_t", host)) + 15) // 16 * 16
    x = wrapper.TensorDescriptor.contiguous(address, "float32", (ROWS, COLS))
    with pytest.raises(wrapper.TileportDeviceError) as caught:
        library.call("softmax", (x, x))
    assert caught.value.status == Status.DEVICE
    assert "cutile_softmax" in str(caught.value)
    misaligned = wrapper.TensorDescriptor.contiguous(address + 4, "float32", (ROWS, COLS))
    with pytest.raises(wrapper.TileportLayoutError) as refused:
        library.call("softmax", (misaligned, x))
    assert refused.value.status == Status.MISALIGNED


def test_plans_through_the_wrapper(
    library: Any, wrapper: ModuleType, softmax_binding: OperatorBinding
) -> None:
    x = wrapper.TensorDescriptor.contiguous(0x7F00_0000_0000, "float32", (8192, 2048))
    plan = library.plan("softmax", (x, x))
    spec = load_port_spec(softmax_binding.spec_path)
    perf = spec.resolve(next(c for c in spec.perf_configs if c.dtype == "float32"), "perf")
    expected = plan_for(softmax_binding, perf)
    assert plan == wrapper.Plan(variant=0, grid=(8192, 1, 1), generics=expected.generics)


def test_a_library_from_another_cdef_is_refused(
    wrapper: ModuleType, library_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wrapper, "FINGERPRINT", wrapper.FINGERPRINT ^ 1)
    with pytest.raises(wrapper.TileportAbiMismatch, match="another cdef"):
        wrapper.Library(library_file)


def test_the_module_function_uses_the_default_library(
    wrapper: ModuleType, library_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILEPORT_KERNELS_LIB", str(library_file))
    monkeypatch.setattr(wrapper, "_DEFAULT", None)
    with pytest.raises(wrapper.TileportDtypeError):
        wrapper.softmax(_torch_like("torch.float64"), _torch_like("torch.float64"))
    assert wrapper.default_library().path == library_file


def test_inside_the_repository_load_rebuilds_lazily(
    wrapper: ModuleType, library_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No path, no $TILEPORT_KERNELS_LIB, no library beside the wrapper: `load()` asks
    the builder, which rebuilds under its lock only when a source is newer."""
    from nodes.host_builder import library as builder

    asked: list[bool] = []

    def ensure_built(log_path: Path | None = None) -> Path:
        asked.append(True)
        return library_file

    monkeypatch.delenv("TILEPORT_KERNELS_LIB", raising=False)
    monkeypatch.setattr(builder, "ensure_built", ensure_built)
    assert wrapper.load().path == library_file
    assert asked == [True]


@dataclass
class TorchTensor(FakeTensor):
    """Also answers get_device(), as a torch tensor does: its calls are cached."""

    def get_device(self) -> int:
        return 0


def _on_device(address: int, shape: tuple[int, int] = (ROWS, COLS)) -> TorchTensor:
    return TorchTensor(address, "torch.float32", shape, (shape[1], 1), FakeDevice("cuda"))


def _refusals_in_another_thread(
    library: Any, wrapper: ModuleType, arrays: tuple[Any, ...]
) -> list[BaseException]:
    """The device refusals of a softmax call on `arrays` made from a thread of its own
    (no GPU here: a call that reaches the C side is refused there)."""
    errors: list[BaseException] = []

    def other_thread() -> None:
        try:
            library.call("softmax", arrays)
        except wrapper.TileportDeviceError as exc:
            errors.append(exc)

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    return errors


def test_a_call_of_the_same_layout_reuses_its_checks_with_the_new_addresses(
    library: Any, wrapper: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fresh tensors of one layout (a new output each call) take the fast path: no
    second check or descriptor building, only the addresses rewritten, and the C side
    gets the new ones; another layout or another thread is prepared on its own."""
    library._checked.clear()
    with pytest.raises(wrapper.TileportDeviceError):  # no GPU here: the C side refuses
        library.call("softmax", (_on_device(0x7F00_0000_0000), _on_device(0x7F00_1000_0000)))
    (prepared,) = library._checked.values()
    seen: list[tuple[int, int]] = []

    def recorded(x: Any, y: Any, stream: Any) -> int:
        seen.append((int(x.data), int(y.data)))
        return 0

    monkeypatch.setattr(prepared, "function", recorded)
    prepare = library.prepare
    monkeypatch.setattr(library, "prepare", lambda *a: pytest.fail("prepared again"))
    for base in (0x7F00_2000_0000, 0x7F00_4000_0000, 0x7F00_4000_0000):
        library.call("softmax", (_on_device(base), _on_device(base + 0x1000_0000)))
    assert seen == [
        (0x7F00_2000_0000, 0x7F00_3000_0000),
        (0x7F00_4000_0000, 0x7F00_5000_0000),
        (0x7F00_4000_0000, 0x7F00_5000_0000),
    ]
    assert prepared.addresses == [0x7F00_4000_0000, 0x7F00_5000_0000]
    monkeypatch.setattr(library, "prepare", prepare)
    wider = (_on_device(0x7F00_0000_0000, (ROWS, 2048)), _on_device(0x7F00_1000_0000, (ROWS, 2048)))
    with pytest.raises(wrapper.TileportDeviceError):
        library.call("softmax", wider)
    assert len(library._checked) == 2
    # The fast path rewrites shared descriptors: each thread has its own.
    arrays = (_on_device(0x7F00_6000_0000), _on_device(0x7F00_7000_0000))
    assert len(_refusals_in_another_thread(library, wrapper, arrays)) == 1
    assert len(library._checked) == 3
    assert prepared.addresses == [0x7F00_4000_0000, 0x7F00_5000_0000]


def test_a_refused_address_is_still_refused_on_the_fast_path(
    library: Any, wrapper: ModuleType
) -> None:
    """The wrapper's checks never read an address: the C side checks it on every call,
    cached or not (here a misaligned one)."""
    library._checked.clear()
    aligned = (_on_device(0x7F00_0000_0000), _on_device(0x7F00_1000_0000))
    with pytest.raises(wrapper.TileportDeviceError):
        library.call("softmax", aligned)
    with pytest.raises(wrapper.TileportLayoutError) as refused:
        library.call("softmax", (_on_device(0x7F00_0000_0004), aligned[1]))
    assert refused.value.status == Status.MISALIGNED and len(library._checked) == 1


def test_plain_tensors_on_the_current_stream_are_found_by_their_layout_alone(
    library: Any, wrapper: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With torch's current-stream lookup (here a stand-in: no CUDA on this machine),
    a repeated call on plain tensors is keyed by each one's dtype, extents and strides
    and the stream: no second check, the new addresses reach the C side; another
    layout, a CPU tensor or an explicit stream take the checked path."""
    streams: list[int] = []

    def current_stream(index: int) -> int:
        streams.append(index)
        return 0x5000 + index

    library._checked.clear()
    library._repeated.clear()
    monkeypatch.setattr(library, "_raw_stream", current_stream)
    with pytest.raises(wrapper.TileportDeviceError):  # no GPU here: the C side refuses
        library.call("softmax", (_on_device(0x7F00_0000_0000), _on_device(0x7F00_1000_0000)))
    (prepared,) = library._repeated.values()
    (key,) = library._repeated
    assert key[1] == 0x5000 and int(library.ffi.cast("uintptr_t", prepared.stream)) == 0x5000
    seen: list[tuple[int, int, int]] = []

    def recorded(x: Any, y: Any, stream: Any) -> int:
        seen.append((int(x.data), int(y.data), int(library.ffi.cast("uintptr_t", stream))))
        return 0

    monkeypatch.setattr(prepared, "function", recorded)
    prepare = library.prepare
    monkeypatch.setattr(library, "prepare", lambda *a: pytest.fail("prepared again"))
    library.call("softmax", (_on_device(0x7F00_2000_0000), _on_device(0x7F00_3000_0000)))
    assert seen == [(0x7F00_2000_0000, 0x7F00_3000_0000, 0x5000)]
    monkeypatch.setattr(library, "prepare", prepare)
    wider = (_on_device(0x7F00_0000_0000, (ROWS, 2048)), _on_device(0x7F00_1000_0000, (ROWS, 2048)))
    with pytest.raises(wrapper.TileportDeviceError):
        library.call("softmax", wider)
    assert len(library._repeated) == 2
    on_host = _torch_like(address=0x1000, device=FakeDevice("cpu"))
    with pytest.raises(wrapper.TileportDeviceError, match="not on a CUDA device"):
        library.call("softmax", (on_host, _on_device(0x7F00_1000_0000)))
    with pytest.raises(wrapper.TileportDeviceError):
        library.call("softmax", (_on_device(0x7F00_0000_0000), _on_device(0x7F00_1000_0000)), (), 7)
    assert len(library._repeated) == 2 and seen == [(0x7F00_2000_0000, 0x7F00_3000_0000, 0x5000)]


def test_alternating_layouts_each_get_their_own_prepared_call(
    library: Any, wrapper: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator's last repeated call is looked at before the kept ones: calls that
    alternate between two layouts, or come from another thread, still each reach the
    prepared call of their own layout, with their own addresses."""
    library._checked.clear()
    library._repeated.clear()
    library._last_repeated.clear()
    monkeypatch.setattr(library, "_raw_stream", lambda index: 0x5000)
    narrow = (ROWS, COLS)
    wide = (ROWS, 2 * COLS)
    seen: list[tuple[int, int, int]] = []

    def pair(base: int, shape: tuple[int, int]) -> tuple[Any, Any]:
        return _on_device(base, shape), _on_device(base + 0x1000_0000, shape)

    for shape in (narrow, wide):
        with pytest.raises(wrapper.TileportDeviceError):  # no GPU here: the C side refuses
            library.call("softmax", pair(0x7F00_0000_0000, shape))

    def recording(columns: int) -> Any:
        def recorded(x: Any, y: Any, stream: Any) -> int:
            seen.append((columns, int(x.data), int(y.data)))
            return 0

        return recorded

    for prepared in library._repeated.values():
        monkeypatch.setattr(prepared, "function", recording(prepared.arguments[0].shape[1]))
    prepare = library.prepare
    monkeypatch.setattr(library, "prepare", lambda *a: pytest.fail("prepared again"))
    calls = [(0x7F00_2000_0000, narrow), (0x7F00_4000_0000, wide), (0x7F00_6000_0000, narrow)]
    for base, shape in calls:
        library.call("softmax", pair(base, shape))
    assert seen == [(shape[1], base, base + 0x1000_0000) for base, shape in calls]
    assert len(library._repeated) == 2
    (last_key, last) = library._last_repeated["softmax"]
    assert last.addresses == [0x7F00_6000_0000, 0x7F00_7000_0000] and last_key[3][0][1] == narrow
    # Another thread's call is another key: it is prepared on its own, not the last one.
    monkeypatch.setattr(library, "prepare", prepare)
    arrays = pair(0x7F00_8000_0000, narrow)
    assert len(_refusals_in_another_thread(library, wrapper, arrays)) == 1
    assert len(library._repeated) == 3
    assert last.addresses == [0x7F00_6000_0000, 0x7F00_7000_0000]
