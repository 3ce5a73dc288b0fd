"""The analyzer's source reading, constant-branch interpreter and launch capture."""

from __future__ import annotations

import textwrap
import types
from pathlib import Path
from typing import Any

import cuda.tile as ct
import pytest

from nodes.analyzer.branches import Scope, branch_outcome, reaches
from nodes.analyzer.capture import (
    CaptureError,
    alignment,
    capture_launches,
    scalar_dtype,
    to_specialisation,
)
from nodes.analyzer.source import SourceError, read_kernel_source

KERNEL = """
import cuda.tile as ct
from cuda.tile import gather as g


def helper(x, i):
    return ct.gather(x, i, check_bounds=False, padding_value=-1)


@ct.kernel
def k(x, y, n, BLOCK: ct.Constant[int], MODE: ct.Constant[int], FAST: ct.Constant[bool]):
    t = ct.load(x, index=(0,), shape=(BLOCK,), padding_mode=ct.PaddingMode.ZERO)
    if MODE == 1 and BLOCK >= 64:
        t = ct.exp(t)
        if FAST:
            t = ct.astype(t, ct.float16)
    else:
        t = helper(x, t)
    while n > 0:
        n = n - 1
    if x.dtype == ct.float32:
        t = t * 2
    scale = 2 if not FAST else 1
    if some_call(BLOCK):
        pass
    ct.store(y, index=(0,), tile=t * scale)
"""


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "k.py"
    path.write_text(textwrap.dedent(KERNEL))
    return path


def test_source_facts(source: Path) -> None:
    facts = read_kernel_source(source, "k")
    assert facts.parameters == ["x", "y", "n", "BLOCK", "MODE", "FAST"]
    assert facts.constant_parameters == ["BLOCK", "MODE", "FAST"]
    assert facts.helpers == ["helper"]
    assert {"load", "exp", "astype", "gather", "store"} <= facts.calls
    assert facts.padding_modes == {"zero", "value -1"}
    assert [(c.value, c.target) for c in facts.conversions] == [("t", "float16")]
    assert facts.check_bounds
    assert facts.unchecked_access_lines == [7]


def test_constant_branches_are_found_and_runtime_ones_ignored(source: Path) -> None:
    branches = read_kernel_source(source, "k").branches
    assert [(b.kind, b.condition) for b in branches] == [
        ("if", "MODE == 1 and BLOCK >= 64"),
        ("if", "FAST"),
        ("if", "x.dtype == ct.float32"),
        ("conditional", "not FAST"),
    ]
    assert branches[1].enclosing == ((0, True),)


def test_branch_outcomes_per_configuration(source: Path) -> None:
    facts = read_kernel_source(source, "k")
    modules = facts.cutile_modules
    mode, fast, dtype, _ = facts.branches

    def scope(**constants: Any) -> Scope:
        return Scope(constants=constants, array_dtypes={"x": "float16", "y": "float16"})

    assert branch_outcome(mode, scope(MODE=1, BLOCK=64), modules) is True
    assert branch_outcome(mode, scope(MODE=1, BLOCK=32), modules) is False
    assert branch_outcome(mode, scope(BLOCK=64), modules) is None  # MODE unknown
    assert branch_outcome(dtype, scope(), modules) is False
    f32 = Scope(constants={}, array_dtypes={"x": "float32"})
    assert branch_outcome(dtype, f32, modules) is True
    # FAST sits inside the MODE branch: a configuration that skips it never reaches it.
    assert not reaches(fast, {mode.index: False})
    assert reaches(fast, {mode.index: True}) and reaches(fast, {mode.index: None})


def test_unknown_kernel_and_syntax_errors(tmp_path: Path, source: Path) -> None:
    with pytest.raises(SourceError) as missing:
        read_kernel_source(source, "nope")
    assert missing.value.field == "kernel"
    broken = tmp_path / "broken.py"
    broken.write_text("def k(:\n    pass\n")
    with pytest.raises(SourceError) as syntax:
        read_kernel_source(broken, "k")
    assert syntax.value.line == 1 and syntax.value.field is None


# -- launch capture: a scripted `launch` stands in for the GPU ---------------------------


class FakeDeviceArray:
    """Something that looks like a device array through __cuda_array_interface__."""

    def __init__(
        self,
        shape: tuple[int, ...],
        typestr: str,
        pointer: int,
        strides: tuple[int, ...] | None = None,
    ) -> None:
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "strides": strides,
            "data": (pointer, False),
            "version": 3,
        }


class FakeTensor:
    """Something that looks like a torch tensor."""

    def __init__(self, shape: tuple[int, ...], stride: tuple[int, ...], pointer: int) -> None:
        self.shape = shape
        self.dtype = "torch.bfloat16"
        self._stride = stride
        self._pointer = pointer

    def stride(self) -> tuple[int, ...]:
        return self._stride

    def data_ptr(self) -> int:
        return self._pointer


@ct.kernel(occupancy=2)
def scale_kernel(x, y, alpha, n, TILE: ct.Constant[int]):  # type: ignore[no-untyped-def]
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(y, index=(ct.bid(0),), tile=t * alpha)


def fake_module(calls: list[tuple[Any, ...]]) -> types.SimpleNamespace:
    def launch(stream: Any, grid: Any, kernel: Any, args: Any, /, **options: Any) -> str:
        calls.append((stream, grid, kernel, args, options))
        return "launched"

    return types.SimpleNamespace(launch=launch)


def test_capture_records_and_forwards_every_launch() -> None:
    forwarded: list[tuple[Any, ...]] = []
    module = fake_module(forwarded)
    original = module.launch
    x = FakeDeviceArray((1000, 37), "<f2", 0x7F0000001000, strides=(80, 2))
    y = FakeDeviceArray((1000, 37), "<f2", 0x7F0000002008)
    results: list[object] = []

    def operator_entry() -> None:
        results.append(module.launch("stream", (63,), scale_kernel, (x, y, 0.5, 1000, 64)))
        results.append(
            module.launch("stream", [2, 3], scale_kernel, (x, y, 2.0, 3_000_000_000, 128))
        )

    launches = capture_launches(operator_entry, target=module)
    assert module.launch is original  # restored
    assert results == ["launched", "launched"] and len(forwarded) == 2
    first, second = launches
    assert first.kernel == "scale_kernel" and first.grid == (63, 1, 1)
    assert first.constants == {"TILE": 64}
    assert first.scalars["alpha"].dtype == "float32" and first.scalars["n"].dtype == "int32"
    assert second.scalars["n"].dtype == "int64" and second.grid == (2, 3, 1)
    assert first.arrays["x"].strides == [40, 1]
    assert first.arrays["x"].base_addr_divisible_by == 16
    assert first.arrays["y"].strides == [37, 1]  # contiguous: no strides in the interface
    assert first.arrays["y"].base_addr_divisible_by == 8
    assert first.hints == {"occupancy": 2}

    specialisation = to_specialisation(first, "main")
    facts = specialisation.params["x"]
    assert facts.kind == "array"
    assert facts.facts.stride_divisible_by == [8, 1]  # 40 f16 elements = 80 bytes: 16-aligned
    assert specialisation.params["y"].facts.base_addr_divisible_by == 8  # type: ignore[union-attr]
    assert specialisation.hints is not None and specialisation.hints.occupancy == 2
    with pytest.raises(CaptureError, match="int64"):
        to_specialisation(second, "main")


def test_capture_restores_launch_when_the_entry_point_raises() -> None:
    module = fake_module([])
    original = module.launch

    def failing() -> None:
        raise RuntimeError("operator failed")

    with pytest.raises(RuntimeError):
        capture_launches(failing, target=module)
    assert module.launch is original


def test_capture_reads_torch_like_tensors_and_lists() -> None:
    module = fake_module([])
    weights = [FakeTensor((64, 128), (128, 1), 0x1000) for _ in range(3)]
    x = FakeTensor((10, 64), (64, 1), 0x2002)

    @ct.kernel
    def grouped(x, ws, TILE: ct.Constant[int]):  # type: ignore[no-untyped-def]
        ct.store(x, index=(0, 0), tile=ct.load(x, index=(0, 0), shape=(TILE, TILE)))

    (launch,) = capture_launches(
        lambda: module.launch(None, 4, grouped, [x, weights, 16]), target=module
    )
    assert launch.arrays["x"].dtype == "bfloat16" and launch.arrays["x"].base_addr_divisible_by == 2
    assert launch.arrays["ws"].list_length == 3 and launch.arrays["ws"].shape == [64, 128]
    assert to_specialisation(launch, "v").params["ws"].kind == "array_list"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((object(), None, 0.5, 1, 64), "cannot describe a object"),
        ((None, None, 0.5, 1), "takes 5 arguments, got 4"),
    ],
)
def test_capture_refuses_what_it_cannot_describe(args: tuple[Any, ...], message: str) -> None:
    module = fake_module([])
    with pytest.raises(CaptureError, match=message):
        capture_launches(lambda: module.launch(None, 1, scale_kernel, args), target=module)


def test_capture_refuses_a_bad_grid() -> None:
    module = fake_module([])
    x = FakeDeviceArray((4,), "<f4", 0)
    with pytest.raises(CaptureError, match="grid"):
        capture_launches(
            lambda: module.launch(None, (0,), scale_kernel, (x, x, 1.0, 1, 4)), target=module
        )


def test_alignment_and_scalar_types() -> None:
    assert [alignment(a) for a in (0, 1, 6, 8, 48, 4096)] == [16, 1, 2, 8, 16, 16]
    assert scalar_dtype(True) == "bool" and scalar_dtype(2**31) == "int64"
    assert scalar_dtype(-(2**31)) == "int32" and scalar_dtype(1.5) == "float32"


def test_what_the_interpreter_does_not_know_stays_undetermined(tmp_path: Path) -> None:
    path = tmp_path / "u.py"
    path.write_text(
        "import cuda.tile as ct\n\n"
        "@ct.kernel\n"
        "def u(x, B: ct.Constant[int]):\n"
        "    if B ** 2 > 64:\n"
        "        pass\n"
        "    if B > 'text':\n"
        "        pass\n"
    )
    facts = read_kernel_source(path, "u")
    power, mixed = facts.branches
    scope = Scope(constants={"B": 16}, array_dtypes={"x": "float32"})
    assert branch_outcome(power, scope, facts.cutile_modules) is None
    assert branch_outcome(mixed, scope, facts.cutile_modules) is None


def test_a_module_literal_decides_a_branch_as_its_value(tmp_path: Path) -> None:
    # gelu's `if APPROXIMATE == GELU_TANH:` is a constant branch: GELU_TANH = 1.
    path = tmp_path / "m.py"
    path.write_text(
        "import cuda.tile as ct\n\n"
        "TANH = 1\n"
        "TWICE = 2\n"
        "TWICE = 3\n"
        "SCALE = some_call()\n\n"
        "@ct.kernel\n"
        "def m(x, MODE: ct.Constant[int]):\n"
        "    if MODE == TANH:\n"
        "        pass\n"
        "    if MODE == TWICE:\n"  # bound twice: not a literal
        "        pass\n"
        "    if MODE == SCALE:\n"
        "        pass\n"
    )
    facts = read_kernel_source(path, "m")
    (tanh,) = facts.branches
    assert tanh.condition == "MODE == 1"
    outcome = {
        mode: branch_outcome(tanh, Scope({"MODE": mode}, {"x": "float32"}), facts.cutile_modules)
        for mode in (0, 1)
    }
    assert outcome == {0: False, 1: True}


def test_locals_of_constants_and_the_booleans_calls_take_from_them(tmp_path: Path) -> None:
    # `tiles` and `partial` are numbers cuTile folds; `partial` handed to a gather picks
    # its structure as an `if` would. A local bound twice, or reading an array, is not one.
    path = tmp_path / "d.py"
    path.write_text(
        "import cuda.tile as ct\n\n"
        "ConstInt = ct.Constant[int]\n\n"
        "@ct.kernel\n"
        "def d(x, N: ConstInt, TILE: ct.Constant[int]):\n"
        "    tiles = ct.cdiv(N, TILE)\n"
        "    partial = tiles * TILE != N\n"
        "    width = max(N, 16) // 2\n"
        "    twice = N\n"
        "    twice = N * 2\n"
        "    shaped = x.shape[0] * N\n"
        "    for t in range(tiles):\n"
        "        a = ct.gather(x, t, check_bounds=partial)\n"
        "        b = ct.gather(x, t, check_bounds=partial, latency=tiles)\n"
        "        c = ct.gather(x, t, check_bounds=N > 8 and TILE < 64)\n"
    )
    facts = read_kernel_source(path, "d")
    assert facts.constant_parameters == ["N", "TILE"]  # ConstInt is ct.Constant[int]
    assert facts.derived == {
        "tiles": "cdiv(N, TILE)",
        "partial": "cdiv(N, TILE) * TILE != N",
        "width": "max(N, 16) // 2",
    }
    # One branch per distinct condition, written over the constants.
    assert [(b.kind, b.spec_condition) for b in facts.branches] == [
        ("argument", "cdiv(N, TILE) * TILE != N"),
        ("argument", "N > 8 and TILE < 64"),
    ]
    partial = facts.branches[0]
    sides = {
        n: branch_outcome(partial, Scope({"N": n, "TILE": 64}, {}), facts.cutile_modules)
        for n in (128, 130)
    }
    assert sides == {128: False, 130: True}


def test_a_branch_reading_a_dtype_has_no_spec_condition(tmp_path: Path) -> None:
    path = tmp_path / "t.py"
    path.write_text(
        "import cuda.tile as ct\n\n"
        "@ct.kernel\n"
        "def t(x, B: ct.Constant[int]):\n"
        "    if x.dtype == ct.float16 and B > 2:\n"
        "        pass\n"
    )
    (branch,) = read_kernel_source(path, "t").branches
    assert branch.spec_condition is None
