"""Producer launches: a stage of a multi-kernel operator gets the launches before it
that make its inputs, read from the host code and the records of the same test.

A small two-stage operator written here: `count` tallies keys into a zeroed table,
`place` scatters each key to its slot from that table; an unrelated `scale` launch
between them writes nothing `place` reads."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from nodes.spec_writer.writer import write_specs
from schemas.launch_capture import LaunchRecord
from schemas.port_spec import PortSpecError, load_port_spec, parse_port_spec

OPERATOR = """\
import cuda.tile as ct
import torch


@ct.kernel
def count(keys, table, N: ct.Constant[int]):
    key = ct.gather(keys, ct.bid(0))
    old = ct.gather(table, key)
    ct.scatter(table, key, old + 1)


@ct.kernel
def scale(x, y):
    ct.store(y, index=(0,), tile=ct.load(x, index=(0,), shape=(16,)) * 2)


@ct.kernel
def place(keys, table, slots, N: ct.Constant[int]):
    key = ct.gather(keys, ct.bid(0))
    slot = ct.gather(table, key)
    ct.scatter(slots, slot, ct.bid(0))


def arrange(keys, x, y, n):
    counts = torch.zeros((n,), dtype=torch.int32, device=keys.device)
    table = counts.reshape(-1)
    slots = torch.empty((keys.numel(),), dtype=torch.int32, device=keys.device)
    stream = torch.cuda.current_stream()
    ct.launch(stream, (keys.numel(),), count, (keys, table, n))
    ct.launch(stream, (1,), scale, (x, y))
    ct.launch(stream, (keys.numel(),), place, (keys, table, slots, n))
    return slots
"""


def tensor(dtype: str, shape: list[int]) -> dict[str, object]:
    return {
        "kind": "tensor",
        "dtype": dtype,
        "shape": shape,
        "stride": [1],
        "align16": True,
        "contig": True,
    }


def launch(test: str, kernel: str, keys: int, n: int) -> LaunchRecord:
    args = {
        "count": (["keys", "table", "N"], [tensor("int64", [keys]), tensor("int32", [n])]),
        "scale": (["x", "y"], [tensor("float32", [16]), tensor("float32", [16])]),
        "place": (
            ["keys", "table", "slots", "N"],
            [tensor("int64", [keys]), tensor("int32", [n]), tensor("int32", [keys])],
        ),
    }[kernel]
    params, tensors = args
    values = [{"kind": "int", "value": n}] if "N" in params else []
    return LaunchRecord.model_validate(
        {
            "test": test,
            "kernel": kernel,
            "file": "ops/arrange.py",
            "line": 1,
            "grid": [keys if kernel != "scale" else 1, 1, 1],
            "params": params,
            "args": [*tensors, *values],
        }
    )


def operator_call(test: str, keys: int, n: int) -> list[LaunchRecord]:
    return [launch(test, k, keys, n) for k in ("count", "scale", "place")]


@pytest.fixture
def library(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "__init__.py").write_text("")
    (root / "ops" / "arrange.py").write_text(textwrap.dedent(OPERATOR))
    return root


def _spec(records: list[LaunchRecord], library: Path, out: Path, kernel: str) -> Path:
    written, problems = write_specs(records, library, out)
    assert problems == []
    return next(w.path for w in written if w.kernel == kernel)


def test_a_stage_gets_the_launches_that_make_its_inputs(library: Path, tmp_path: Path) -> None:
    records = [*operator_call("t.py::a", 40, 8), *operator_call("t.py::b", 100, 16)]
    spec = load_port_spec(_spec(records, library, tmp_path / "specs", "place"))
    for config, (keys, n) in zip(spec.test_configs, [(40, 8), (100, 16)], strict=True):
        # `scale` writes nothing `place` reads: not a producer
        assert [p.kernel for p in config.producers] == ["count"]
        producer = config.producers[0]
        assert producer.grid == [keys]
        assert [a.array for a in producer.arguments[:2]] == ["keys", "table"]
        assert producer.arguments[2].value == n
    # The host zeroes the table (a view of a zeroed allocation) before `count` writes it.
    table_init = spec.arrays["table"].init
    assert table_init is not None and table_init.kind == "zeros"
    assert spec.arrays["keys"].init is None or spec.arrays["keys"].init.kind != "zeros"
    # The first stage has nothing before it.
    first = load_port_spec(tmp_path / "specs" / "count.port.yaml")
    assert all(not c.producers for c in first.test_configs)


def test_without_the_producers_records_no_configuration_gets_any(
    library: Path, tmp_path: Path
) -> None:
    # The second call's `count` was not recorded: neither configuration gets producers,
    # so the spec's inputs are made one way throughout.
    records = [*operator_call("t.py::a", 40, 8), *operator_call("t.py::b", 100, 16)[1:]]
    spec = load_port_spec(_spec(records, library, tmp_path / "specs", "place"))
    assert all(not c.producers for c in spec.test_configs)
    assert spec.arrays["table"].init is None or spec.arrays["table"].init.kind != "zeros"


def test_a_shared_array_recorded_with_another_shape_is_not_shared(
    library: Path, tmp_path: Path
) -> None:
    records = operator_call("t.py::a", 40, 8)
    records[0] = launch("t.py::a", "count", 40, 9)  # its table is not place's table
    spec = load_port_spec(_spec(records, library, tmp_path / "specs", "place"))
    assert all(not c.producers for c in spec.test_configs)


def test_a_producer_must_name_an_input_array_of_the_spec(library: Path, tmp_path: Path) -> None:
    path = _spec(operator_call("t.py::a", 40, 8), library, tmp_path / "specs", "place")
    data = yaml.safe_load(path.read_text())
    data["test_configs"][0]["producers"][0]["arguments"][1] = {"array": "nowhere"}
    with pytest.raises(PortSpecError, match="unknown array 'nowhere'"):
        parse_port_spec(data, path)
    data["test_configs"][0]["producers"][0]["arguments"][1] = {"array": "slots"}
    with pytest.raises(PortSpecError, match="not an input array"):
        parse_port_spec(data, path)
    data["test_configs"][0]["producers"][0]["arguments"][1] = {"array": "table", "value": 3}
    with pytest.raises((PortSpecError, ValidationError), match="exactly one"):
        parse_port_spec(data, path)
