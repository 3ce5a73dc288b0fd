"""A TileGym checkout as the command edits it: where the cutile-rs backend's files
are, the three shared files an op is registered in, and git (local changes are
refused, the result is `git diff` against HEAD)."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from schemas.tilegym_backend import LAUNCH_WORDS_MODULE, PROVEN_MODULE, SPEC_ARITH_MODULE
from toolchain.env import KERNELS_RS

CUTILE_RS = Path("src/tilegym/ops/cutile_rs")
CRATE_LIB = CUTILE_RS / "cutile_kernels/src/lib.rs"
# tileport's hand-written modules every op's ffi.rs uses, copied as they are beside
# ffi_util.rs and declared once in lib.rs: spec_arith.rs (Python-semantics
# arithmetic and launch facts), proven.rs (the launcher of proven entries) and
# launch.rs (how a symbol reads the words its wrapper packed).
SPEC_ARITH = CUTILE_RS / f"{SPEC_ARITH_MODULE}.rs"
PROVEN = CUTILE_RS / f"{PROVEN_MODULE}.rs"
LAUNCH_WORDS = CUTILE_RS / f"{LAUNCH_WORDS_MODULE}.rs"
TILEPORT_MODULES = {
    SPEC_ARITH: KERNELS_RS / "ported/src/ffi/spec_arith.rs",
    PROVEN: KERNELS_RS / "ported/src/ffi/proven.rs",
    LAUNCH_WORDS: KERNELS_RS / "tilegym/launch.rs",
}
# The launch's other two halves, copied as they are beside the wrappers: the compiled
# launch (C++, built on its first use against the imported torch) and its loader,
# which every wrapper imports.
TILEPORT_HOST_FILES = {
    LAUNCH_WORDS.with_suffix(".cpp"): KERNELS_RS / "tilegym/launch.cpp",
    LAUNCH_WORDS.with_suffix(".py"): KERNELS_RS / "tilegym/launch.py",
}
PACKAGE_INIT = CUTILE_RS / "__init__.py"
OP_TESTS = Path("tests/ops")
_IMPORT_LINE = "    from . import {op}  # noqa: F401  (register dispatch entry)"
_IMPORT = re.compile(r"^    from \. import (\w+)  # noqa: F401.*$", re.MULTILINE)
_BACKENDS = re.compile(
    r'^(?P<indent>[ \t]*)_backends = \[(?:"\w+", )*"cutile"(?:, "\w+")*\]\n', re.MULTILINE
)


class CheckoutError(ValueError):
    """The checkout cannot take the change; says why."""


@dataclass(frozen=True)
class OpFiles:
    """Every file adding `op` writes, relative to the checkout."""

    op: str
    test: Path

    @property
    def kernel_dir(self) -> Path:
        return CUTILE_RS / f"{self.op}_kernel"

    @property
    def kernel_rs(self) -> Path:
        return self.kernel_dir / "kernel.rs"

    @property
    def ffi_rs(self) -> Path:
        return self.kernel_dir / "ffi.rs"

    @property
    def wrapper(self) -> Path:
        return CUTILE_RS / f"{self.op}.py"

    @property
    def all(self) -> list[Path]:
        return [
            self.kernel_rs,
            self.ffi_rs,
            self.wrapper,
            CRATE_LIB,
            *TILEPORT_MODULES,
            *TILEPORT_HOST_FILES,
            PACKAGE_INIT,
            self.test,
        ]


def _git(checkout: Path, *args: str, index: Path | None = None) -> str:
    env = {**os.environ, "GIT_INDEX_FILE": str(index)} if index else None
    done = subprocess.run(
        ["git", "-C", str(checkout), *args], capture_output=True, text=True, check=False, env=env
    )
    if done.returncode != 0:
        raise CheckoutError(f"git {' '.join(args)} in {checkout}: {done.stderr.strip()}")
    return done.stdout


def check_checkout(checkout: Path) -> None:
    if not (checkout / CRATE_LIB).is_file() or not (checkout / PACKAGE_INIT).is_file():
        raise CheckoutError(f"{checkout} is not a TileGym checkout with a cutile-rs backend")
    _git(checkout, "rev-parse", "--verify", "HEAD")


def local_changes(checkout: Path, paths: list[Path]) -> list[str]:
    """Those of `paths` that differ from HEAD or are untracked, as git lists them."""
    out = _git(checkout, "status", "--porcelain", "--untracked-files=all", "--", *map(str, paths))
    return [line[3:] for line in out.splitlines() if line.strip()]


def head_text(checkout: Path, path: Path) -> str | None:
    """`path` as HEAD holds it; None when HEAD has no such file."""
    listed = _git(checkout, "ls-tree", "--name-only", "HEAD", "--", str(path))
    return _git(checkout, "show", f"HEAD:{path}") if listed.strip() else None


def diff(checkout: Path, paths: list[Path]) -> str:
    """`paths` against HEAD as one patch, new files included. A scratch index stages
    them, so the checkout's own index is left as it was."""
    with tempfile.TemporaryDirectory() as scratch:
        index = Path(scratch) / "index"
        _git(checkout, "read-tree", "HEAD", index=index)
        present = [str(p) for p in paths if (checkout / p).exists()]
        _git(checkout, "add", "--", *present, index=index)
        return _git(checkout, "diff", "--cached", "HEAD", "--", *map(str, paths), index=index)


def find_test(checkout: Path, op: str) -> Path:
    """tests/ops/**/test_<op>.py, else the one test file that names the op."""
    found = sorted((checkout / OP_TESTS).rglob(f"test_{op}.py"))
    if not found:
        named = re.compile(rf"\b{re.escape(op)}\b")
        found = [
            path
            for path in sorted((checkout / OP_TESTS).rglob("test_*.py"))
            if named.search(path.read_text(encoding="utf-8"))
        ]
    if len(found) != 1:
        listed = ", ".join(str(p.relative_to(checkout)) for p in found) or "none"
        raise CheckoutError(
            f"no one test file of {op}: tests/ops/**/test_{op}.py or the test file naming "
            f"it (found: {listed})"
        )
    return found[0].relative_to(checkout)


def with_tileport_modules(lib_rs: str) -> str:
    """lib.rs declaring tileport's modules, each once, after `mod ffi_util;`."""
    anchor = re.search(r"^mod ffi_util;\n", lib_rs, re.MULTILINE)
    if anchor is None:
        raise CheckoutError(f"{CRATE_LIB} declares no `mod ffi_util;` to put tileport's beside")
    missing = [path for path in TILEPORT_MODULES if f"mod {path.stem};" not in lib_rs]
    if not missing:
        return lib_rs
    block = (
        "\n// tileport's checked arithmetic of port-spec expressions and cuTile's launch\n"
        "// facts, and its launcher of proven entries, shared by the ffi.rs files\n"
        "// tileport writes (each uses what it needs).\n"
    )
    for path in missing:
        block += f'#[path = "../../{path.name}"]\n#[allow(dead_code)]\nmod {path.stem};\n'
    return lib_rs[: anchor.end()] + block + lib_rs[anchor.end() :]


def with_module(lib_rs: str, op: str) -> str:
    """lib.rs with `mod <op> { include!(...) }` appended, once."""
    if re.search(rf"^mod {op} \{{", lib_rs, re.MULTILINE):
        return lib_rs
    block = (
        f"\nmod {op} {{\n"
        f'    include!("../../{op}_kernel/kernel.rs");\n'
        f'    include!("../../{op}_kernel/ffi.rs");\n'
        "}\n"
    )
    return lib_rs.rstrip("\n") + "\n" + block


def with_import(init_py: str, op: str) -> str:
    """__init__.py importing the wrapper in the backend's block, kept sorted."""
    imports = _IMPORT.findall(init_py)
    if op in imports:
        return init_py
    if not imports:
        raise CheckoutError(f"{PACKAGE_INIT} has no `from . import <op>` block to extend")
    later = [name for name in imports if name > op]
    line = _IMPORT_LINE.format(op=op)
    if later:
        anchor = re.search(rf"^    from \. import {later[0]}  # noqa", init_py, re.MULTILINE)
        assert anchor is not None
        return init_py[: anchor.start()] + line + "\n" + init_py[anchor.start() :]
    last = list(_IMPORT.finditer(init_py))[-1]
    return init_py[: last.end()] + "\n" + line + init_py[last.end() :]


def with_backend(test_py: str, path: Path) -> str:
    """The test file with "cutile-rs" added to its backends where available."""
    if '"cutile-rs"' in test_py:
        return test_py
    start = _BACKENDS.search(test_py)
    if start is None:
        raise CheckoutError(f'{path}: no `_backends = [..., "cutile", ...]` to add "cutile-rs" to')
    if not _IMPORTS_AVAILABILITY.search(test_py):  # `tilegym.is_backend_available` is not it
        test_py = _importing_availability(test_py, path)
        start = _BACKENDS.search(test_py)
        assert start is not None
    indent = start.group("indent")
    lines = test_py[start.end() :].split("\n")
    # The backends block: `if is_backend_available(...)` lines and their bodies.
    taken = 0
    while taken < len(lines) and (
        lines[taken].startswith(f"{indent}if is_backend_available(")
        or lines[taken].startswith(f"{indent}    _backends = _backends + [")
    ):
        taken += 1
    end = start.end() + sum(len(line) + 1 for line in lines[:taken])
    added = (
        f'{indent}if is_backend_available("cutile-rs"):\n'
        f'{indent}    _backends = _backends + ["cutile-rs"]\n'
    )
    return test_py[:end] + added + test_py[end:]


# The bare name is in scope: imported, or already called as such.
_IMPORTS_AVAILABILITY = re.compile(
    r"^from tilegym\.backend import .*\bis_backend_available\b|(?<![\w.])is_backend_available\(",
    re.MULTILINE,
)
_TOP_IMPORT = re.compile(r"^(?:import|from) \S+.*$", re.MULTILINE)


def _importing_availability(test_py: str, path: Path) -> str:
    """The test file importing `is_backend_available`, next to its other imports."""
    imports = list(_TOP_IMPORT.finditer(test_py))
    if not imports:
        raise CheckoutError(f"{path}: no imports to put is_backend_available beside")
    anchor = next(
        (m for m in reversed(imports) if m.group().startswith("from tilegym.backend import")),
        imports[-1],
    )
    line = "from tilegym.backend import is_backend_available"
    return test_py[: anchor.end()] + "\n" + line + test_py[anchor.end() :]
