"""A port made from recorded launches serves a launch none of them holds: the
records are aligned float32/float16 launches of a few widths; the launch is
bfloat16, its input one element past a 16-byte boundary, and its width (the
constant `N`) one no record has. The spec writer widens the records into classes
(`tileport specs --classes`), the kernel writer ports them, and the launch is then
checked as the launcher would make it: the variant its condition picks, the
entry's generic arguments computed for it, its IR and SASS against the reference
exported for that very launch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from nodes.kernel_writer.stage import port_kernel, port_targets
from nodes.kernel_writer.verify import check_config
from nodes.spec_writer.writer import write_specs
from schemas.kernel_writer import KernelWriterVerdict
from schemas.launch_capture import parse_launch_record
from schemas.port_spec import load_port_spec, spec_relative
from toolchain.reference_export import (
    CUBIN_TARGETS,
    export_with_dumps,
    library_module,
    specialise,
)
from toolchain.rust_export import RustExporter

KERNELS = Path(__file__).parent / "fixtures" / "kernels"
TILE = 64


def _record(dtype: str, rows: int, width: int) -> str:
    def tensor(shape: list[int]) -> dict[str, object]:
        strides = [shape[1], 1] if len(shape) == 2 else [1]
        kind = {"kind": "tensor", "shape": shape, "stride": strides}
        return {**kind, "dtype": dtype, "align16": True, "contig": True}

    return json.dumps(
        {
            "test": f"test_absmax[{dtype}-{rows}-{width}]",
            "kernel": "row_absmax_kernel",
            "file": "row_absmax_tiles.py",
            "line": 9,
            "grid": [rows, 1, 1],
            "params": ["x", "y", "N", "TILE"],
            "args": [
                tensor([rows, width]),
                {**tensor([rows]), "dtype": "float32"},
                {"kind": "int", "value": width},
                {"kind": "int", "value": TILE},
            ],
        }
    )


@pytest.mark.slow
def test_a_widened_port_serves_a_launch_no_record_holds(tmp_path: Path) -> None:
    lines = [_record("float32", 8, 256), _record("float16", 16, 512)]
    lines += [_record("float32", 32, 200), _record("float16", 48, 320 + 7)]
    records = [parse_launch_record(line) for line in lines]
    written, problems = write_specs(records, KERNELS, tmp_path / "specs", widen=True)
    assert not problems and len(written) == 1
    spec_path = written[0].path
    report = port_kernel(spec_path, tmp_path / "port")
    assert report.verdict is KernelWriterVerdict.COMPILED, report.summary
    assert not report.literal_entries

    # The launch: bfloat16, x one element in, a width no record has (N follows it).
    data = yaml.safe_load(spec_path.read_text())
    assert data["constants"]["N"] == {"type": "int", "default": "X_1"}
    unseen = {
        "name": "unseen",
        "dims": {"X_0": 3, "X_1": 333},
        "dtype": "bfloat16",
        "array_dtypes": {"y": "float32"},
        "storage_offsets": {"x": 1},
    }
    data["test_configs"].append(unseen)
    unseen_path = spec_path.with_name("unseen.port.yaml")
    unseen_path.write_text(yaml.safe_dump(data, sort_keys=False))

    [target] = [t for t in port_targets(unseen_path) if t.label.endswith("__unseen")]
    assert target.dispatch == "(X_1 % 64 != 0)"  # 333 leaves a partial tile
    entry = next(e for e in report.entries if e.name == target.entry)
    names = [g.split(":")[0].removeprefix("const ").strip() for g in entry.generics]
    args = [target.generic_values[name] for name in names]
    assert "bf16" in args  # the element type no record had

    spec = load_port_spec(unseen_path)
    resolved = spec.resolve(spec.test_configs[-1], "test")
    references = tmp_path / "reference"
    export_with_dumps(
        spec_relative(unseen_path, spec.source),
        spec.kernel,
        [specialise(resolved).model_copy(update={"variant": target.label})],
        references,
        dumps={},
        cubin_targets=(),
        entry_symbol=spec.entry_symbol,
        **library_module(unseen_path, spec),
    )
    with RustExporter() as exporter:
        check = check_config(
            exporter,
            (tmp_path / "port" / "kernel.rs").resolve(),
            target.entry,
            args,
            (references / f"{target.label}.mlir").read_text(),
            references / f"{target.label}.bytecode",
            CUBIN_TARGETS,
            tmp_path / "generated",
            target.label,
            target.variant,
            tmp_path,
        )
    assert check.sass_identical, check
