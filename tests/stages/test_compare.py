"""The correctness comparison (`nodes.correctness.harness.compare`) on the cases the
H200 runs met: elements neither kernel writes stay the NaN both outputs were
poisoned with, and a NaN or a finite value on one side only still fails.

torch is not installed on the build machine; the GPU host runs these (CPU tensors)."""

from __future__ import annotations

import pytest

from nodes.correctness.harness import compare

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
