"""The one emitter of spec expressions (`host_builder.rust_expr`) with the helpers
it calls (`kernels_rs/ported/src/ffi/spec_arith.rs`), compiled by rustc and run:
every construct of the spec language gives what Python gives (`schemas.spec_expr`),
negative operands, zero divisors and overflow included, or an error where Python
has no integer answer."""

from __future__ import annotations

import itertools
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from nodes.host_builder.rust_expr import Kind, Transpiler, Variable, unwrapped
from schemas.spec_expr import ExprError, evaluate
from toolchain.env import KERNELS_RS

SPEC_ARITH = KERNELS_RS / "ported/src/ffi/spec_arith.rs"
OPERANDS = (-17, -16, -7, -1, 0, 1, 3, 16, 17, 1 << 62)
# (expression, kind): each construct family of the spec language.
EXPRESSIONS: tuple[tuple[str, Kind], ...] = (
    ("A + B", Kind.INT),
    ("A - B", Kind.INT),
    ("A * B", Kind.INT),
    ("A // B", Kind.INT),
    ("A % B", Kind.INT),
    ("-A // B % 16", Kind.INT),
    ("A ** 2", Kind.INT),
    ("A << 3", Kind.INT),
    ("A >> 2", Kind.INT),
    ("A << B", Kind.INT),
    ("A >> B", Kind.INT),
    ("cdiv(A, B)", Kind.INT),
    ("next_pow2(A)", Kind.INT),
    ("min(A, B, 5)", Kind.INT),
    ("max(A, -B)", Kind.INT),
    ("A if A % 16 == 0 else next_pow2(B)", Kind.INT),
    ("A / B", Kind.FLOAT),
    ("A * 0.5 + B", Kind.FLOAT),
    ("-5 <= A < B", Kind.BOOL),
    ("A % 16 == 0 and not B > 1 or A == -7", Kind.BOOL),
)
NO_INTEGER_ANSWER = "error"


def python_answer(text: str, a: int, b: int) -> str:
    try:
        value = evaluate(text, {"A": a, "B": b})
    except ExprError:
        return NO_INTEGER_ANSWER
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        # The launchers compute in i64: a value past it has no answer there.
        return str(value) if -(1 << 63) <= value < (1 << 63) else NO_INTEGER_ANSWER
    return repr(float(value)) if math.isfinite(value) else NO_INTEGER_ANSWER


RUST_TYPES = {Kind.INT: "i64", Kind.FLOAT: "f64", Kind.BOOL: "bool"}


def program(codes: list[tuple[str, Kind]]) -> str:
    """One function per expression, and a main printing each over every operand pair."""
    lines = [
        "#![deny(warnings)]",
        "#![allow(unused_variables, dead_code)]",
        f'#[path = "{SPEC_ARITH}"]',
        "mod rt;",
        "use rt::ExprResult;",
        "fn show<T: std::fmt::Debug>(value: ExprResult<T>) -> String {",
        '    value.map_or_else(|_| "error".to_string(), |v| format!("{v:?}"))',
        "}",
    ]
    for index, (code, kind) in enumerate(codes):
        lines.append(f"fn e{index}(a: i64, b: i64) -> ExprResult<{RUST_TYPES[kind]}> {{")
        lines.append(f"    Ok({unwrapped(code)})")
        lines.append("}")
    operands = ", ".join(f"{value}i64" for value in OPERANDS)
    lines.append("fn main() {")
    lines.append(f"    let operands = [{operands}];")
    lines.append("    for a in operands {")
    lines.append("        for b in operands {")
    for index in range(len(codes)):
        lines.append(f'            println!("{index} {{a}} {{b}} {{}}", show(e{index}(a, b)));')
    lines += ["        }", "    }", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.skipif(shutil.which("rustc") is None, reason="rustc is not installed")
def test_every_construct_gives_what_python_gives(tmp_path: Path) -> None:
    transpiler = Transpiler({"A": Variable("a", Kind.INT), "B": Variable("b", Kind.INT)})
    codes = [(transpiler.expression(text, kind), kind) for text, kind in EXPRESSIONS]
    source = tmp_path / "main.rs"
    source.write_text(program(codes))
    binary = tmp_path / "spec_expressions"
    built = subprocess.run(
        ["rustc", "--edition", "2021", "-O", "-o", str(binary), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(binary)], capture_output=True, text=True, check=True, timeout=60)
    rust = {}
    for line in ran.stdout.splitlines():
        index, a, b, value = line.split(" ", 3)
        rust[(int(index), int(a), int(b))] = value
    mismatches = []
    for (index, (text, kind)), a, b in itertools.product(
        enumerate(EXPRESSIONS), OPERANDS, OPERANDS
    ):
        want = python_answer(text, a, b)
        got = rust[(index, a, b)]
        if kind is Kind.FLOAT and NO_INTEGER_ANSWER not in (got, want):
            got, want = repr(float(got)), repr(float(want))
        if got != want:
            mismatches.append(f"{text} with A={a}, B={b}: Python {want}, Rust {got}")
    assert not mismatches, "\n".join(mismatches[:30])
    # The grid reaches what truncating arithmetic gets wrong, and the error paths.
    assert python_answer("A // B", -7, 16) == "-1" and python_answer("A % B", -7, 16) == "9"
    assert python_answer("A // B", 1, 0) == NO_INTEGER_ANSWER
    assert python_answer("A * B", 1 << 62, 16) == NO_INTEGER_ANSWER
