"""The correctness comparison (`nodes.correctness.harness.compare`) on the cases the
H200 runs met: elements neither kernel writes stay the NaN both outputs were
poisoned with, and a NaN or a finite value on one side only still fails; a list
of arrays (an output list, TileGym's group GEMM) is made and compared element by
element.

torch is not installed on the build machine; the GPU host runs these (CPU tensors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodes.correctness.harness import compare, make_arrays
from schemas.port_spec import load_port_spec

torch = pytest.importorskip("torch", reason="torch is not installed here (the GPU host has it)")
NAN = float("nan")
INF = float("inf")


def _compare(got: list[float], want: list[float]) -> tuple[bool, bool, str]:
    result = compare(torch, "y", torch.tensor(got), torch.tensor(want), atol=1e-6, rtol=1e-6)
    return result.passed, result.nonfinite, result.message


def test_elements_unwritten_by_both_are_equal() -> None:
    passed, nonfinite, message = _compare([1.0, NAN, 3.0], [1.0, NAN, 3.0])
    assert passed and not nonfinite
    assert message == "y: max abs 0.000e+00, max rel 0.000e+00"


def test_the_same_infinity_is_equal_and_the_other_is_not() -> None:
    assert _compare([INF, -INF], [INF, -INF])[0]
    passed, nonfinite, _ = _compare([INF], [-INF])
    assert not passed and nonfinite


@pytest.mark.parametrize(
    ("got", "want"),
    [([1.0, NAN], [1.0, 2.0]), ([1.0, 2.0], [1.0, NAN]), ([INF], [5.0])],
    ids=["unwritten-by-the-port", "written-only-by-the-port", "overflow"],
)
def test_a_non_finite_value_on_one_side_fails(got: list[float], want: list[float]) -> None:
    passed, nonfinite, message = _compare(got, want)
    assert not passed and nonfinite
    assert "1 element(s) finite on one side only" in message


def test_a_finite_error_is_judged_by_the_tolerance_only_where_both_are_finite() -> None:
    passed, _, message = _compare([1.0, NAN, 3.5], [1.0, NAN, 3.0])
    assert not passed
    assert message.startswith("y: max abs 5.000e-01")


def test_a_list_is_compared_element_by_element() -> None:
    want = [torch.tensor([1.0, 2.0]), torch.tensor([3.0])]
    same = compare(torch, "Cs", [t.clone() for t in want], want, atol=1e-6, rtol=1e-6)
    assert same.passed and same.message == "Cs (2 arrays): max abs 0.000e+00, max rel 0.000e+00"
    off = compare(torch, "Cs", [want[0].clone(), torch.tensor([NAN])], want, 1e-6, 1e-6)
    assert not off.passed and off.nonfinite and off.message.startswith("Cs[1]:")
    short = compare(torch, "Cs", [want[0].clone()], want, 1e-6, 1e-6)
    assert not short.passed and short.message == "Cs: 1 arrays, the reference's 2"


def test_an_output_list_is_poisoned_per_side(tmp_path: Path) -> None:
    """The list spec of the host tests with its list made the output: each side gets
    its own `list_length` tensors, every element poisoned; the inputs are drawn."""
    source = Path(__file__).parents[1] / "host" / "data" / "pick_rows.port.yaml"
    text = source.read_text(encoding="utf-8").replace(
        "role: in, list_length", "role: out, list_length"
    )
    spec_path = tmp_path / source.name
    spec_path.write_text(
        text.replace("source: pick_rows.py", f"source: {source.parent}/pick_rows.py")
    )
    spec = load_port_spec(spec_path)
    config, purpose = spec.all_configs()[0]
    resolved = spec.resolve(config, purpose)
    arrays = make_arrays(torch, spec, resolved, seed=0, device="cpu")
    port, kernel = arrays.port_outputs["tables"], arrays.kernel_outputs["tables"]
    assert isinstance(port, list) and len(port) == resolved.arrays["tables"].list_length
    assert all(a.data_ptr() != b.data_ptr() for a, b in zip(port, kernel, strict=True))
    assert all(bool(t.isnan().all()) for t in port + kernel)
    assert "tables" not in arrays.inputs


def _members(value: object) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_producers_prepare_the_drawn_inputs_before_each_side_copies_them(
    tmp_path: Path,
) -> None:
    """`prepare` (the runner's producer launches) sees every drawn input and no output,
    and what it writes is what both sides receive, an inout array copied per side."""
    source = Path(__file__).parents[1] / "host" / "data" / "pick_rows.port.yaml"
    spec_path = tmp_path / source.name
    spec_path.write_text(
        source.read_text(encoding="utf-8")
        .replace("role: out", "role: inout")
        .replace("source: pick_rows.py", f"source: {source.parent}/pick_rows.py")
    )
    spec = load_port_spec(spec_path)
    config, purpose = spec.all_configs()[0]
    resolved = spec.resolve(config, purpose)
    seen: list[str] = []

    def prepare(drawn: dict[str, object]) -> None:
        seen.extend(drawn)
        for value in drawn.values():
            for tensor in _members(value):
                tensor.fill_(7)

    arrays = make_arrays(torch, spec, resolved, seed=0, device="cpu", prepare=prepare)
    assert seen == list(resolved.arrays)  # every array is an input now
    for side in (arrays.port_outputs, arrays.kernel_outputs, arrays.inputs):
        for value in side.values():
            assert all(
                bool((t == 7).all()) for t in (value if isinstance(value, list) else [value])
            )
    out = next(n for n, a in resolved.arrays.items() if a.role == "inout")
    assert arrays.port_outputs[out].data_ptr() != arrays.kernel_outputs[out].data_ptr()
