"""The corpus's reference IRs together contain every op of the production
vocabulary (issue 3 "Op vocabulary"): each corpus kernel is exported, every
variant, and the ops of the MLIR texts are collected."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tileir.vocabulary import VOCABULARY
from toolchain.env import REPO_ROOT
from toolchain.reference_export import export_from_spec

CORPUS = REPO_ROOT / "examples" / "kernels"

# `%a, %b = op ...`, `%r:2 = op ...` or a bare `op ...` (return, yield, if, continue).
_OP = re.compile(r"^\s*(?:%[^=]*=\s*)?([a-z_][a-z0-9_]*)\b")


def ops_of(mlir: str) -> Counter[str]:
    """The op names of a tileirdisasm text, with counts."""
    ops: Counter[str] = Counter()
    for line in mlir.splitlines():
        text = line.strip()
        if not text or text[0] in "(}#" or text.startswith(("entry ", "loc(")):
            continue
        match = _OP.match(text)
        if match:
            ops[match.group(1)] += 1
    return ops


def test_vocabulary_has_63_ops() -> None:
    assert len(VOCABULARY) == len(set(VOCABULARY)) == 63


def test_ops_of_reads_every_line_form() -> None:
    text = """entry @k(%arg0: tile<i32>) optimization_hints=<default = {}> {
  %0 = make_token : token
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %2:2 = loop iter_values(%a = %c) : tile<i32> -> tile<i32> {
    if %4 {
      break %a : tile<i32>
    }
    continue %a : tile<i32>
  }
  (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
    yield %5 : tile<f32>
  }
  return
}"""
    assert ops_of(text) == Counter(
        {
            "make_token": 1,
            "get_tile_block_id": 1,
            "loop": 1,
            "if": 1,
            "break": 1,
            "continue": 1,
            "yield": 1,
            "return": 1,
        }
    )


@pytest.fixture(scope="module")
def corpus_ops(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Counter[str]]:
    """Ops per `<kernel>/<variant>`, from a fresh export of every corpus spec."""
    out = tmp_path_factory.mktemp("corpus")
    found: dict[str, Counter[str]] = {}
    for spec in sorted(CORPUS.glob("*.port.yaml")):
        kernel = spec.name.removesuffix(".port.yaml")
        record = export_from_spec(spec, out / kernel, cubin_targets=[])
        for variant in record.variants:
            text = (out / kernel / variant.mlir).read_text()
            found[f"{kernel}/{variant.variant}"] = ops_of(text)
    return found


@pytest.mark.slow
def test_corpus_covers_the_vocabulary(corpus_ops: dict[str, Counter[str]]) -> None:
    seen: Counter[str] = sum(corpus_ops.values(), Counter())
    missing = [op for op in VOCABULARY if op not in seen]
    beyond = sorted(set(seen) - set(VOCABULARY))
    print(f"\n{len(corpus_ops)} variants; {len(VOCABULARY) - len(missing)}/63 vocabulary ops")
    print(f"ops beyond the vocabulary: {beyond}")
    for op in VOCABULARY:
        where = sorted(k for k, ops in corpus_ops.items() if op in ops)
        print(f"  {op:22} {len(where):2}  {', '.join(where[:3])}")
    assert not missing, f"missing from the corpus IRs: {missing}"


@pytest.mark.slow
def test_only_atomics_go_beyond_the_vocabulary(corpus_ops: dict[str, Counter[str]]) -> None:
    """The issue also asks for a kernel using atomics; nothing else leaves the vocabulary."""
    seen: Counter[str] = sum(corpus_ops.values(), Counter())
    assert set(seen) - set(VOCABULARY) == {"atomic_rmw_tko"}
