"""tileport specs on a small library written here: a package with relative imports,
a `ct.Constant` alias from another module, a store through a `@ct.function` helper,
an index array, a constant branch and host hints. The specs load, say what the
records say, and export (the kernel sliced out of the unmodified package)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.cli import build_parser
from nodes.spec_writer.grid import grid_expression
from nodes.spec_writer.writer import parse_hints, write_specs
from schemas.exit_codes import ExitCode
from schemas.launch_capture import LaunchRecord, TensorArg
from schemas.port_spec import kernel_parameter_order, load_port_spec, spec_relative
from toolchain.reference_export import export_from_spec

TYPES = """\
import cuda.tile as ct
ConstInt = ct.Constant[int]
"""
HELPERS = """\
import cuda.tile as ct


@ct.function
def put(out, row, tile):
    ct.store(out, index=(row,), tile=tile)
"""
KERNELS = """\
import torch  # not installed here: a stand-in
import cuda.tile as ct

from ..common.types import ConstInt
from .helpers import put

HOST_TABLE = torch.zeros(3)  # host code the kernel does not need


@ct.kernel
def gather_rows(x, idx, out, n, BLOCK: ConstInt, SCALE: ct.Constant[bool]):
    row = ct.bid(0)
    picked = ct.load(idx, index=(row,), shape=(1,))
    tile = ct.load(x, index=(row,), shape=(BLOCK,))
    if SCALE:
        tile = tile * 2.0
    put(out, row, tile)
"""

FILL = """\
import cuda.tile as ct

from ..common.types import ConstInt


@ct.kernel
def fill_rows(out, N_ROWS: ConstInt):
    for row in range(ct.bid(0), N_ROWS, ct.num_blocks(0)):
        tile = ct.full((16,), 7, dtype=out.dtype)
        ct.store(out, index=(row, 0), tile=tile)
"""


ROW_SCALE = """\
import cuda.tile as ct


@ct.kernel
def row_scale(x, out, N: ct.Constant[int], TILE: ct.Constant[int]):
    row = ct.bid(0)
    offsets = ct.arange(TILE, dtype=ct.int32)
    num_tiles = ct.cdiv(N, TILE)
    check_bound = num_tiles * TILE != N
    for j in range(num_tiles):
        offs = j * TILE + offsets
        tile = ct.gather(x, (row, offs), check_bounds=check_bound)
        ct.scatter(out, (row, offs), tile * 2.0, check_bounds=check_bound)
"""


ROW_CACHE = """\
import cuda.tile as ct


@ct.kernel
def row_cache(x, out, N: ct.Constant[int], TILE: ct.Constant[int]):
    row = ct.bid(0)
    offsets = ct.arange(TILE, dtype=ct.int32)
    check_bound = TILE != N
    tile = ct.gather(x, (row, offsets), check_bounds=check_bound)
    ct.scatter(out, (row, offsets), tile * 2.0, check_bounds=check_bound)
"""


@pytest.fixture
def library(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    for relative, text in {
        "mylib/__init__.py": "raise ImportError('the package init never runs')\n",
        "mylib/common/__init__.py": "",
        "mylib/common/types.py": TYPES,
        "mylib/ops/__init__.py": "",
        "mylib/ops/helpers.py": HELPERS,
        "mylib/ops/rows.py": KERNELS,
        "mylib/ops/fill.py": FILL,
        "mylib/ops/scale.py": ROW_SCALE,
        "mylib/ops/cache.py": ROW_CACHE,
    }.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def tensor(dtype: str, shape: list[int], low: int | None = None, high: int | None = None) -> dict:
    strides = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * shape[axis + 1]
    arg = {"kind": "tensor", "dtype": dtype, "shape": shape, "stride": strides}
    arg |= {"align16": True, "contig": True}
    return arg | ({"min": low, "max": high} if low is not None else {})


def record(
    rows: int, block: int, scale: bool, dtype: str, hints: str | None = None
) -> LaunchRecord:
    blocks = -(-rows // block)
    return LaunchRecord.model_validate(
        {
            "test": "tests/test_rows.py::test[x]",
            "kernel": "gather_rows",
            "file": "mylib/ops/rows.py",
            "line": 11,
            "grid": [blocks, 1, 1],
            "params": ["x", "idx", "out", "n", "BLOCK", "SCALE"],
            "args": [
                tensor(dtype, [rows]),
                tensor("int32", [rows], 0, rows - 1),
                tensor(dtype, [rows]),
                {"kind": "int", "value": rows},
                {"kind": "int", "value": block},
                {"kind": "bool", "value": scale},
            ],
            "hints": hints,
        }
    )


RECORDS = [
    record(1000, 128, True, "float32", "<default = {occupancy = 4}>"),
    record(4096, 256, True, "float16", "<default = {occupancy = 4}>"),
    record(777, 64, False, "float32", "<default = {}>"),
]


def test_a_spec_from_records(library: Path, tmp_path: Path) -> None:
    written, problems = write_specs(RECORDS, library, tmp_path / "specs")
    assert problems == [] and len(written) == 1
    spec = load_port_spec(written[0].path)
    assert (spec.module, spec.kernel) == ("mylib.ops.rows", "gather_rows")
    assert {n: a.role for n, a in spec.arrays.items()} == {"x": "in", "idx": "in", "out": "out"}
    assert set(spec.constants) == {"BLOCK", "SCALE"} and set(spec.scalars) == {"n"}
    assert spec.grid == ["cdiv(X_0, BLOCK)"]
    assert spec.arrays["x"].shape == spec.arrays["out"].shape == ["X_0"]
    init = spec.arrays["idx"].init
    assert init is not None and (init.kind, init.low, init.high) == ("randint", 0, "X_0")
    # BLOCK follows no expression of the shapes (1000 -> 128, 4096 -> 256, 777 -> 64):
    # each value is a variant, as are the sides of `if SCALE` and the hinted launches;
    # configurations bind no constants (the C launcher derives them)
    assert len(spec.variants) == 3
    assert sorted(v.constants["BLOCK"] for v in spec.variants) == [64, 128, 256]
    assert all(not c.constants for c in spec.test_configs)
    assert {v.hints.occupancy if v.hints else None for v in spec.variants} == {4, None}
    assert spec.test_configs[0].dims["X_0"] % 16, "ragged first"
    assert spec.reference.oracle == "reference_kernel"


def test_widened_integers_are_generic_candidates_not_variants(
    library: Path, tmp_path: Path
) -> None:
    # As `tilegym add` writes it: BLOCK's values no longer split variants (the kernel
    # writer makes it generic where the IR lets it); `if SCALE` and the hints still do,
    # and each recorded BLOCK keeps a configuration.
    written, problems = write_specs(RECORDS, library, tmp_path / "specs", widen=True)
    assert problems == []
    spec = load_port_spec(written[0].path)
    assert len(spec.variants) == 2
    assert all("BLOCK" not in v.constants for v in spec.variants)
    assert {v.when for v in spec.variants} == {"(SCALE == True)", "(SCALE == False)"}
    recorded = [c for c in spec.test_configs if not c.name.endswith(("_ragged", "bfloat16"))]
    assert {c.constants["BLOCK"] for c in recorded} == {64, 128, 256}


def with_index_values(launch: LaunchRecord) -> LaunchRecord:
    """`launch` with its index recorded as `tileport capture` records a small one: a
    permutation of the rows (the reverse order), beside its range."""
    index = launch.args[1].model_copy(update={"values": list(reversed(range(len_of(launch))))})
    return launch.model_copy(update={"args": [launch.args[0], index, *launch.args[2:]]})


def len_of(launch: LaunchRecord) -> int:
    index = launch.args[1]
    assert isinstance(index, TensorArg)
    return index.shape[0]


def test_recorded_values_become_the_configurations_inputs(library: Path, tmp_path: Path) -> None:
    # The aligned record carries its index's values, the ragged one (the other variant)
    # only its range.
    aligned, ragged = RECORDS[1], RECORDS[2]
    records = [with_index_values(aligned), ragged]
    written, problems = write_specs(records, library, tmp_path / "specs", widen=True)
    assert problems == []
    # Not tried and dropped: never made (a ragged class would get 4096 values for 4095).
    assert not [reason for reason in written[0].dropped_classes if "values" in reason]
    assert "idx: [4095, 4094, 4093," in written[0].path.read_text()  # one line, not 4096
    spec = load_port_spec(written[0].path)
    index = with_index_values(aligned).args[1]
    assert isinstance(index, TensorArg) and index.values is not None
    seen: dict[int, list[str]] = {}
    for config in spec.test_configs:
        rows = config.dims["X_0"]
        seen.setdefault(rows, []).append(config.name)
        # What the harness gives the arrays: exactly the recorded values where the
        # record has them (the dtype and unaligned classes, which keep the shapes,
        # included); drawn elsewhere.
        values = spec.resolve(config, "test").values
        assert values == ({"idx": index.values} if rows == 4096 else {}), config.name
    # No ragged (or half-aligned) class is made from the configuration with values:
    # its values hold for its shapes only.
    assert set(seen) == {4096, 777}
    assert {n.rpartition("_")[2] for n in seen[4096]} >= {"float16", "bfloat16", "unaligned"}
    # Without values, the same record gets its ragged class (4095 rows).
    plain, _ = write_specs([aligned, ragged], library, tmp_path / "plain", widen=True)
    assert 4095 in {c.dims["X_0"] for c in load_port_spec(plain[0].path).test_configs}
    # The range still gives the bounds of the arrays drawn.
    init = spec.arrays["idx"].init
    assert init is not None and (init.kind, init.low, init.high) == ("randint", 0, "X_0")


def scale_record(rows: int, width: int, tile: int) -> LaunchRecord:
    return LaunchRecord.model_validate(
        {
            "test": "tests/test_scale.py::test[x]",
            "kernel": "row_scale",
            "file": "mylib/ops/scale.py",
            "line": 7,
            "grid": [rows, 1, 1],
            "params": ["x", "out", "N", "TILE"],
            "args": [
                tensor("float16", [rows, width]),
                tensor("float16", [rows, width]),
                {"kind": "int", "value": width},
                {"kind": "int", "value": tile},
            ],
        }
    )


def test_a_tile_as_wide_as_its_row_narrows_with_it(library: Path, tmp_path: Path) -> None:
    # TILE follows no rule (the host caps it: 2048 for 18432 columns), so it is free;
    # the rows that fill their tiles (no bounds check) were all recorded 16-aligned.
    # Their narrower class (8 columns) keeps a tile as wide as the row, so it stays
    # in that variant and the width's fact becomes a generic: rows of 2, 4 and 8
    # columns are served, not refused for a 16-divisibility no launch promised.
    records = [scale_record(256, 256, 256), scale_record(64, 768, 1024)]
    records += [scale_record(32, 18432, 2048), scale_record(4096, 256, 256)]
    written, problems = write_specs(
        records, library, tmp_path / "specs", widen=True, unit_extents=True
    )
    assert problems == []
    spec = load_port_spec(written[0].path)
    filled = next(v.name for v in spec.variants if v.when.startswith("(not"))
    narrow = [c for c in spec.test_configs if c.name.endswith("_half_aligned")]
    assert [(c.dims, c.constants) for c in narrow] == [({"X_0": 8, "X_1": 8}, {"N": 8, "TILE": 8})]
    assert spec.resolve(narrow[0], "test").variant == filled

    # A launch makes an extent of 1 a shape constant: one row, or one column, runs an
    # entry of its own, dispatched before the variant it narrows.
    names = [v.name for v in spec.variants]
    one_row, one_column = f"{filled}_x_0_1", f"{filled}_x_1_1"
    assert names.index(one_row) < names.index(filled) > names.index(one_column)
    by_variant: dict[str, list[dict[str, int]]] = {}
    for config in spec.test_configs:
        variant = spec.resolve(config, "test").variant
        by_variant.setdefault(variant, []).append({**config.dims, **config.constants})
    # One column: N is 1 and the tile as wide as the row (4096x256's, whose TILE is
    # its columns' alone; a square configuration's tile follows neither extent).
    assert {(c["X_1"], c["N"], c["TILE"]) for c in by_variant[one_column]} == {(1, 1, 1)}
    assert all(c["X_0"] == 1 and c["TILE"] > 1 for c in by_variant[one_row])
    assert len({c["N"] for c in by_variant[one_row]}) > 1  # not one value


def test_a_unit_variant_no_launch_reaches_is_not_written(library: Path, tmp_path: Path) -> None:
    # TILE is next_pow2(N): a row of one column fills its tile, so the bounds-checked
    # variant's one-column launches all go to the other's unit variant; the spec
    # still loads, without a variant no configuration reaches.
    records = [
        record.model_copy(update={"kernel": "row_cache", "file": "mylib/ops/cache.py"})
        for record in (scale_record(64, 256, 256), scale_record(64, 768, 1024))
    ]
    written, problems = write_specs(
        records, library, tmp_path / "specs", widen=True, unit_extents=True
    )
    assert problems == []
    spec = load_port_spec(written[0].path)
    checked = next(v.name for v in spec.variants if v.when == "(next_pow2(X_1) != X_1)")
    filled = next(v.name for v in spec.variants if v.when.startswith("(not"))
    names = {v.name for v in spec.variants}
    assert f"{filled}_x_1_1" in names and f"{checked}_x_1_1" not in names
    assert f"{checked}_x_0_1" in names


def fill_record(rows: int, dtype: str = "int32") -> LaunchRecord:
    return LaunchRecord.model_validate(
        {
            "test": "tests/test_fill.py::test[x]",
            "kernel": "fill_rows",
            "file": "mylib/ops/fill.py",
            "line": 7,
            "grid": [4, 1, 1],
            "params": ["out", "N_ROWS"],
            "args": [tensor(dtype, [rows, 16]), {"kind": "int", "value": rows}],
        }
    )


FILL_RECORDS = [fill_record(16), fill_record(48), fill_record(80), fill_record(16, "float32")]


def test_literal_constants_get_every_recorded_set(library: Path, tmp_path: Path) -> None:
    # N_ROWS is the shape's (one variant, one configuration) until a first port
    # specialises its entries to N_ROWS (G16): then every recorded N_ROWS is proven
    before, _ = write_specs(FILL_RECORDS, library, tmp_path / "before")
    after, _ = write_specs(
        FILL_RECORDS,
        library,
        tmp_path / "after",
        literal_constants={("mylib.ops.fill", "fill_rows"): ["N_ROWS"]},
    )

    def rows(path: Path) -> set[int]:
        return {c.dims["OUT_0"] for c in load_port_spec(path).test_configs}

    assert rows(before[0].path) == {16} and rows(after[0].path) == {16, 48, 80}


def test_the_spec_exports_from_the_unmodified_package(library: Path, tmp_path: Path) -> None:
    written, _ = write_specs(RECORDS, library, tmp_path / "specs")
    record_ = export_from_spec(written[0].path, tmp_path / "out", cubin_targets=())
    assert len(record_.variants) == 3
    loc = (tmp_path / "out" / f"{record_.variants[0].variant}.loc.mlir").read_text()
    assert "mylib/ops/helpers.py" in loc and "mylib/ops/rows.py" in loc


def test_a_kernel_whose_module_is_missing(library: Path, tmp_path: Path) -> None:
    moved = RECORDS[0].model_copy(update={"file": "mylib/ops/gone.py"})
    written, problems = write_specs([moved], library, tmp_path / "specs")
    assert written == [] and "no module 'mylib.ops.gone' under the source root" in problems[0]


def test_a_file_recorded_relative_to_another_folder_says_where_it_was_looked_for(
    library: Path, tmp_path: Path
) -> None:
    # A script run from mylib/ records its kernel's file relative to that folder.
    moved = RECORDS[0].model_copy(update={"file": "ops/rows.py"})
    written, problems = write_specs([moved], library, tmp_path / "specs")
    assert written == [] and "no module 'ops.rows' under the source root" in problems[0]
    assert (
        f"the recorded file ops/rows.py is not at {library.resolve()}/ops/rows.py" in (problems[0])
    )
    assert "tileport capture --source-root" in problems[0]


def test_an_absolute_file_under_the_root_is_found_and_one_outside_it_refused(
    library: Path, tmp_path: Path
) -> None:
    absolute = RECORDS[0].model_copy(update={"file": str(library / "mylib/ops/rows.py")})
    written, problems = write_specs([absolute], library, tmp_path / "specs")
    assert problems == [] and written[0].module == "mylib.ops.rows"
    elsewhere = tmp_path / "elsewhere" / "rows.py"
    elsewhere.parent.mkdir()
    elsewhere.write_text(KERNELS)
    outside = RECORDS[0].model_copy(update={"file": str(elsewhere)})
    written, problems = write_specs([outside], library, tmp_path / "specs")
    assert written == [] and f"{elsewhere} is outside the source root" in problems[0]


def test_a_copied_spec_still_finds_its_library(library: Path, tmp_path: Path) -> None:
    written, _ = write_specs(RECORDS, library, tmp_path / "specs")
    copy = tmp_path / "elsewhere" / "deeper" / written[0].path.name
    copy.parent.mkdir(parents=True)
    shutil.copyfile(written[0].path, copy)
    spec = load_port_spec(copy)
    assert spec.source_root == str(library.resolve())
    assert spec_relative(copy, spec.source) == library.resolve() / "mylib/ops/rows.py"
    assert kernel_parameter_order(spec, copy) == ["x", "idx", "out", "n", "BLOCK", "SCALE"]
    # Relative on request: for specs that travel with the library.
    relative, _ = write_specs(RECORDS, library, tmp_path / "together", relative_source_root=True)
    assert load_port_spec(relative[0].path).source_root == "../src"


def elsewhere_record(tmp_path: Path) -> LaunchRecord:
    """A launch of a kernel outside the library (a test helper's own kernel)."""
    helper = tmp_path / "tests_of_mine" / "fill.py"
    helper.parent.mkdir(exist_ok=True)
    helper.write_text(FILL)
    return fill_record(16).model_copy(update={"file": str(helper)})


def specs_cli(launches: Path, library: Path, out: Path, *kernels: str) -> int:
    argv = ["specs", str(launches), "--source-root", str(library), "--out", str(out)]
    args = build_parser().parse_args([*argv, *(f"--kernel={k}" for k in kernels)])
    code: int = args.handler(args)
    return code


def test_specs_select_kernels_and_skip_those_outside_the_root(
    library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    launches = tmp_path / "launches.jsonl"
    records = [*RECORDS, *FILL_RECORDS, elsewhere_record(tmp_path)]
    launches.write_text("".join(r.model_dump_json() + "\n" for r in records))
    # Every kernel: the one outside the root is listed as skipped, and is no failure.
    assert specs_cli(launches, library, tmp_path / "all") == ExitCode.OK
    err = capsys.readouterr().err
    assert f"skipped: {tmp_path}/tests_of_mine/fill.py::fill_rows: its file is outside" in err
    assert "wrote 2 spec(s)" in err and "1 skipped" in err
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == [
        "fill_rows.port.yaml",
        "gather_rows.port.yaml",
    ]
    # --kernel selects.
    assert specs_cli(launches, library, tmp_path / "one", "gather_rows") == ExitCode.OK
    assert [p.name for p in (tmp_path / "one").iterdir()] == ["gather_rows.port.yaml"]
    # A selected kernel that got no spec fails the command, even beside one written.
    moved = RECORDS[0].model_copy(update={"file": "ops/rows.py"})
    launches.write_text("".join(r.model_dump_json() + "\n" for r in [moved, *FILL_RECORDS]))
    assert specs_cli(launches, library, tmp_path / "two") == ExitCode.FAILED
    assert "no spec: ops/rows.py::gather_rows: no module 'ops.rows'" in capsys.readouterr().err
    # Named, a kernel outside the root fails too; only skipped ones, nothing written.
    launches.write_text(elsewhere_record(tmp_path).model_dump_json() + "\n")
    assert specs_cli(launches, library, tmp_path / "three", "fill_rows") == ExitCode.FAILED
    assert specs_cli(launches, library, tmp_path / "three") == ExitCode.FAILED
    # A name no record holds is bad input.
    assert specs_cli(launches, library, tmp_path / "four", "nope") == ExitCode.BAD_INPUT
    assert "no record of kernel nope" in capsys.readouterr().err
    # Unit extents add to the classes: alone, the flag is refused, nothing written.
    argv = ["specs", str(launches), "--source-root", str(library), "--out", str(tmp_path / "u")]
    args = build_parser().parse_args([*argv, "--unit-extents"])
    assert args.handler(args) == ExitCode.BAD_INPUT
    assert "--unit-extents adds to --classes" in capsys.readouterr().err
    assert not (tmp_path / "u").exists()


def test_records_that_disagree_with_the_source(library: Path, tmp_path: Path) -> None:
    wrong = RECORDS[0].model_copy(update={"params": ["a", "b", "c", "d", "e", "f"]})
    written, problems = write_specs([wrong], library, tmp_path / "specs")
    assert written == [] and "rows.py:11" in problems[0] and "parameters" in problems[0]


def test_hints_text() -> None:
    assert parse_hints(
        "<default = {num_cta_in_cga = 2, occupancy = 1}, sm_80 = {occupancy = 2}>"
    ) == {
        "default": {"num_cta_in_cga": 2, "occupancy": 1},
        "sm_80": {"occupancy": 2},
    }
    assert parse_hints(None) == {}


def test_grid_expressions() -> None:
    scopes = [
        {"M": 100, "N": 7, "T": 16, "num_sms": 132},
        {"M": 64, "N": 3, "T": 32, "num_sms": 132},
    ]
    keys = ["M == 100", "M == 64"]
    assert grid_expression([7, 2], scopes, ["M", "N"], ["T"], ["T"], keys) == "cdiv(M, T)"
    assert grid_expression([700, 192], scopes, ["M", "N"], [], [], keys) == "M * N"
    assert grid_expression([132, 132], scopes, ["M"], [], [], keys) == 132
    assert grid_expression([5, 9], scopes, ["M"], [], [], keys) == "5 if M == 100 else (9)"
    assert json.dumps(grid_expression([100, 64], scopes, ["M"], [], [], keys)) == '"M"'


def test_a_gpu_bundle_carries_the_library_modules_the_kernel_needs(
    library: Path, tmp_path: Path
) -> None:
    """What `tileport gpu-bundle` packs for a library spec: the kernel's module and what
    it imports, and the spec reading them there; the GPU runner slices the kernel out
    of that copy as the export did."""
    from nodes.host_builder.bundle import _copy_library

    written, _ = write_specs(RECORDS, library, tmp_path / "specs")
    spec_path = written[0].path
    copied = _copy_library(spec_path, load_port_spec(spec_path), tmp_path / "bundle" / "spec")
    files = sorted(
        p.relative_to(tmp_path / "bundle").as_posix() for p in (tmp_path / "bundle").rglob("*.py")
    )
    assert files == [
        "spec/library/mylib/common/types.py",
        "spec/library/mylib/ops/helpers.py",
        "spec/library/mylib/ops/rows.py",
    ]
    bundled = load_port_spec(tmp_path / "bundle" / "spec" / spec_path.name)
    assert bundled.source_root == "library" and copied.name == "rows.py"
    # in a process of its own, as the runner: slicing installs an import hook
    code = (
        "import sys; from pathlib import Path; from toolchain.kernel_slice import load_kernel; "
        "print(type(load_kernel(Path(sys.argv[1]), 'mylib.ops.rows', 'gather_rows')[1]).__name__)"
    )
    root = str(tmp_path / "bundle" / "spec" / "library")
    done = subprocess.run([sys.executable, "-c", code, root], capture_output=True, text=True)
    assert done.stdout.strip() == "kernel", done.stderr


LISTS = """\
import cuda.tile as ct

from .helpers import put


@ct.kernel
def per_group(As, Cs, Ds, N: ct.Constant[int]):
    g = ct.bid(0)
    Ai = As[g]
    Ci = Cs[g]
    tile = ct.load(Ai, index=(0,), shape=(N,))
    ct.store(Ci, index=(0,), tile=tile)
    Di = Ds[g]
    put(Di, 0, tile)
"""


def test_a_store_through_a_local_name_writes_its_array(tmp_path: Path) -> None:
    """`Ci = Cs[g]; ct.store(Ci, ...)` writes `Cs` (a list's element, as TileGym's grouped
    GEMM does), also when the local name reaches a helper that stores."""
    from nodes.spec_writer.roles import array_roles
    from toolchain.source_tree import SourceTree

    root = tmp_path / "src" / "pkg"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "helpers.py").write_text(HELPERS)
    (root / "lists.py").write_text(LISTS)
    roles = array_roles(SourceTree(tmp_path / "src"), "pkg.lists", "per_group", ["As", "Cs", "Ds"])
    assert roles == {"As": "in", "Cs": "out", "Ds": "out"}
