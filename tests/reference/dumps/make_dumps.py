"""Regenerate the Tile IR bytecode dumps beside this script (no GPU needed).

    .venv/bin/python tests/reference/dumps/make_dumps.py [OUT_DIR]

The corpus kernel `vector_add` is compiled by cuTile Python's AOT export for the
facts of its spec's representative configuration, with `CUDA_TILE_DUMP_BYTECODE`
set, and what cuTile dumps while compiling is kept: `vector_add.tileirbc` at
bytecode 13.3 and `vector_add.v13_1.tileirbc` at 13.1 (for the version check).
The kernel is compiled under its relative file name, so the dumps' source
locations name `vector_add.py` and no directory of the machine that made them.
The output is deterministic; test_bytecode_dump.py checks the committed dumps
are what this script writes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
CORPUS = REPO / "examples" / "kernels"
DUMPS = {"13.3": "vector_add.tileirbc", "13.1": "vector_add.v13_1.tileirbc"}
CHILD = "--child"


def dump(version: str, out: Path) -> None:
    """Compile vector_add at `version` (cuTile reads CUDA_TILE_DUMP_BYTECODE when it
    is imported, so this runs in a process of its own) and keep the dump."""
    from cuda.tile.compilation import export_kernel

    from schemas.port_spec import load_port_spec
    from toolchain._export_child import kernel_signature
    from toolchain.reference_export import specialisations

    spec = load_port_spec(CORPUS / "vector_add.port.yaml")
    [specialisation] = specialisations(spec)
    os.chdir(CORPUS)
    module = types.ModuleType("vector_add")
    sys.modules[module.__name__] = module
    exec(compile(Path("vector_add.py").read_text(), "vector_add.py", "exec"), vars(module))
    kernel = module.vector_add_kernel
    dump_dir = Path(os.environ["CUDA_TILE_DUMP_BYTECODE"])
    exported = dump_dir / "exported.bytecode"
    export_kernel(
        kernel,
        [kernel_signature(kernel, specialisation, spec.entry_symbol)],
        str(exported),
        output_format="tileir_bytecode",
        gpu_code="sm_90",  # as the reference export; bytecode before 13.3 needs one
        bytecode_version=version,
    )
    [dumped] = dump_dir.glob("*.tileirbc")
    assert dumped.read_bytes() == exported.read_bytes(), "the dump is what the export wrote"
    out.write_bytes(dumped.read_bytes())


def make_dumps(out_dir: Path) -> list[Path]:
    """Write every dump into `out_dir`; returns their paths."""
    written = []
    for version, name in DUMPS.items():
        with tempfile.TemporaryDirectory(prefix="tileport-dump-") as directory:
            env = {**os.environ, "CUDA_TILE_DUMP_BYTECODE": directory, "PYTHONPATH": str(REPO)}
            command = [sys.executable, __file__, CHILD, version, str(out_dir / name)]
            subprocess.run(command, env=env, check=True, capture_output=True)
        written.append(out_dir / name)
    return written


def main(argv: list[str]) -> int:
    if argv[:1] == [CHILD]:
        dump(argv[1], Path(argv[2]).resolve())
        return 0
    out_dir = Path(argv[0]) if argv else HERE
    for path in make_dumps(out_dir.resolve()):
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
