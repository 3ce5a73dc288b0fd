"""The port-spec expression language: what it computes and what it refuses."""

from __future__ import annotations

import pytest

from schemas.spec_expr import ExprError, evaluate, evaluate_int, names_in, parse


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cdiv(1000, 128)", 8),
        ("cdiv(1024, 128)", 8),
        ("next_pow2(781)", 1024),
        ("next_pow2(1024)", 1024),
        ("next_pow2(1)", 1),
        ("min(num_sms, cdiv(M, 128) * cdiv(N, 128))", 132),
        ("M * N >= 1048576", True),
        ("dtype != 'float32'", True),
        ("16 if N > 4096 else 8", 8),
        ("N // 2 + N % 3", 1500),
        ("not (M < 10 and N < 10)", True),
        ("1 << 4", 16),
        ("-M + 2 ** 3", -1992),
        ("0 < M <= 4096", True),
    ],
)
def test_evaluates(text: str, expected: object) -> None:
    env: dict[str, int | str] = {"M": 2000, "N": 3000, "num_sms": 132, "dtype": "float16"}
    assert evaluate(text, env) == expected


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os')",
        "x.shape",
        "x[0]",
        "lambda: 1",
        "[1, 2]",
        "open('f')",
        "cdiv(M, b=2)",
        "M if",
        "(M := 3)",
        "M @ N",
        "M in N",
        "None",
    ],
)
def test_refuses_anything_else(text: str) -> None:
    with pytest.raises(ExprError):
        parse(text)


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ExprError, match=r"unknown name 'K'.*known: M, N"):
        evaluate("cdiv(K, 2)", {"M": 1, "N": 2})


def test_failures_are_expression_errors() -> None:
    with pytest.raises(ExprError, match="failed"):
        evaluate("M // 0", {"M": 1})
    with pytest.raises(ExprError, match="must give an integer"):
        evaluate_int("M / 2", {"M": 4})
    with pytest.raises(ExprError, match="cannot be negated"):
        evaluate("-dtype", {"dtype": "float16"})


def test_names_in_skips_function_names() -> None:
    assert names_in("min(num_sms, cdiv(M, TILE_M))") == {"num_sms", "M", "TILE_M"}


def test_literal_integers_pass_through() -> None:
    assert evaluate_int(7, {}) == 7
    assert evaluate_int("7", {}) == 7


@pytest.mark.parametrize("text", ["1 << N", "3 ** N", "-2 ** N"])
def test_a_value_past_64_bits_is_refused_before_it_is_computed(text: str) -> None:
    """A submitted spec must not make the service build an enormous integer."""
    with pytest.raises(ExprError, match="overflows 64-bit integers"):
        evaluate(text, {"N": 1 << 62})
    assert evaluate(text.replace("N", "3"), {}) in (8, 27, -8)
    assert evaluate("0 << N", {"N": 1 << 62}) == 0
