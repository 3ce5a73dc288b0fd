"""Load a kernel from an unmodified library module by running only what it uses.

A kernel library's modules import torch and the library's own host code at the
top, and its package `__init__` imports everything; none of that is needed to
compile a kernel, and the build machine has no torch. So a module under the
source root is never run as a whole: its module object starts empty and each
top-level statement runs only when a name it binds is needed: the kernel, then,
transitively, the names its statement reads (its decorators, annotations,
`@ct.function` helpers, module constants), across modules of the package
(`from .utils import X` makes `X` needed in `utils`). Statements are compiled
with their own file name and line numbers, so the kernel's source locations,
and hence its Tile IR, are those of a real import.

An import of a module that is neither under the source root nor installed
(torch on the build machine) gets a stand-in whose attributes are stand-ins.
cuTile accepts `torch.<dtype>` and `numpy.<dtype>` objects inside kernel
bodies and recognises them by identity among the library module's attributes,
so those two stand-ins carry one dtype object per cuTile dtype name.

Runs only inside the sandboxed export child (`toolchain._export_child`):
whatever a needed statement does, it does there.
"""

from __future__ import annotations

import ast
import builtins
import importlib.abc
import importlib.machinery
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from toolchain.source_tree import ModuleSource, SourceTree, SourceTreeError, free_names


class SliceError(Exception):
    """A needed statement failed to run; `file` and `line` name it."""

    def __init__(self, message: str, file: Path | None, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line


class StandIn:
    """Any value of a module that is not installed: every use gives another stand-in."""

    def __new__(cls, name: str) -> StandIn:
        if cls is not StandIn:
            return super().__new__(cls)
        # Each value's class is named after it: an error that names a value's type
        # ("Cannot create constant from value of type ...") names what is missing.
        named = type(f"{name} (a stand-in: its module is not installed here)", (StandIn,), {})
        return super().__new__(named)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> StandIn:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return StandIn(f"{self._name}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # A decorator factory's result applied to a function gives the function back,
        # so host code decorated by a missing library still defines its functions.
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], StandIn):
            return args[0]
        return StandIn(f"{self._name}()")

    def __getitem__(self, key: Any) -> StandIn:
        return StandIn(f"{self._name}[...]")

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)

    def __repr__(self) -> str:
        return f"<stand-in {self._name}>"


class StandInModule(ModuleType):
    """A module that is not installed; `import torch.nn.functional as F` works too."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        self.__tileport_stand_in__ = True

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return StandIn(f"{self.__name__}.{attr}")


def _dtype_stand_in(library: str) -> StandInModule:
    """torch or numpy as a stand-in whose dtype names cuTile maps to its own dtypes:
    cuTile finds them by identity among the library module's attributes (torch's are
    `torch.dtype` instances, numpy's scalar types are classes)."""
    import cuda.tile as ct

    module = StandInModule(library)
    base = type("dtype" if library == "torch" else "generic", (), {"__module__": library})
    setattr(module, base.__name__, base)
    for name in dir(ct):
        if isinstance(getattr(ct, name), ct.DType):
            plain = name.rstrip("_")
            made = base() if library == "torch" else type(plain, (base,), {"__module__": library})
            setattr(module, plain, made)
    return module


DTYPE_LIBRARIES: Final = frozenset({"torch", "numpy"})


def _stand_in(name: str) -> ModuleType:
    top = name.partition(".")[0]
    if top not in sys.modules:
        sys.modules[top] = _dtype_stand_in(top) if top in DTYPE_LIBRARIES else StandInModule(top)
    parent = sys.modules[top]
    for depth in range(2, name.count(".") + 2):
        dotted = ".".join(name.split(".")[:depth])
        if dotted not in sys.modules:
            sys.modules[dotted] = StandInModule(dotted)
            setattr(parent, dotted.rpartition(".")[2], sys.modules[dotted])
        parent = sys.modules[dotted]
    return sys.modules[name]


class SlicedLoader(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports modules of a source root as sliced modules (see the module docstring)."""

    def __init__(self, tree: SourceTree) -> None:
        self.tree = tree
        self._ran: dict[str, set[int]] = {}
        self._running: set[tuple[str, int]] = set()

    # -- the import system ---------------------------------------------------------

    def claims(self, fullname: str) -> bool:
        top = fullname.partition(".")[0]
        if top in sys.stdlib_module_names:
            return False
        return self.tree.has_module(fullname)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not self.claims(fullname):
            return None
        located = self.tree.locate(fullname)
        assert located is not None
        file, is_package = located
        return importlib.machinery.ModuleSpec(
            fullname, self, origin=str(file), is_package=is_package
        )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self.empty_module(spec.name)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing runs at import; names are made when they are asked for."""

    def empty_module(self, name: str) -> ModuleType:
        source = self.tree.module(name)
        module = ModuleType(name)
        module.__file__ = str(source.path)
        module.__package__ = source.package
        if source.is_package:
            module.__path__ = [str(source.path.parent if source.path.is_file() else source.path)]
        module.__dict__["__getattr__"] = self._materialiser(module, source)
        return module

    def install(self) -> None:
        sys.meta_path.insert(0, self)

    # -- materialising names ---------------------------------------------------------

    def _materialiser(self, module: ModuleType, source: ModuleSource) -> Callable[[str], Any]:
        def materialise(name: str) -> Any:
            if name.startswith("__") or name not in source.binders:
                raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
            self.need(module, source, name)
            if name in module.__dict__:
                return module.__dict__[name]
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

        return materialise

    def need(self, module: ModuleType, source: ModuleSource, name: str) -> None:
        """Run every statement that binds `name`, after the names each one reads."""
        for index in source.binders.get(name, []):
            self._run(module, source, index)

    def _run(self, module: ModuleType, source: ModuleSource, index: int) -> None:
        ran = self._ran.setdefault(source.name, set())
        key = (source.name, index)
        if index in ran or key in self._running:
            return
        self._running.add(key)
        statement = source.tree.body[index]
        try:
            for name in sorted(free_names(statement)):
                if name not in module.__dict__:
                    self.need(module, source, name)
            self._execute(module, source, statement)
        finally:
            self._running.discard(key)
        ran.add(index)

    def _execute(self, module: ModuleType, source: ModuleSource, statement: ast.stmt) -> None:
        code = compile(ast.Module(body=[statement], type_ignores=[]), str(source.path), "exec")
        real_import = builtins.__import__

        def import_or_stand_in(
            name: str,
            globals: Mapping[str, object] | None = None,
            locals: Mapping[str, object] | None = None,
            fromlist: Sequence[str] | None = (),
            level: int = 0,
        ) -> ModuleType:
            try:
                return real_import(name, globals, locals, fromlist, level)
            except ModuleNotFoundError as exc:
                missing = exc.name or name
                own = globals is module.__dict__  # not an import inside an installed library
                if not own or level or self.tree.has_module(missing.partition(".")[0]):
                    raise
                _stand_in(name)
                return real_import(name, globals, locals, fromlist, level)

        builtins.__import__ = import_or_stand_in
        try:
            exec(code, module.__dict__)
        except SliceError:
            raise
        except SourceTreeError as exc:
            raise SliceError(exc.message, exc.file or source.path, exc.line) from None
        except MemoryError:
            raise
        except BaseException as exc:  # the user's statement: report it where it is
            text = str(exc).strip()
            message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
            raise SliceError(message, source.path, _innermost_line(exc, source.path)) from None
        finally:
            builtins.__import__ = real_import


def _innermost_line(exc: BaseException, file: Path) -> int | None:
    """The line of the innermost frame in `file` (the module's own code)."""
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(file)]
    return lines[-1] if lines else None


def load_kernel(root: Path, module_name: str, kernel: str) -> tuple[ModuleType, Any]:
    """The sliced module and its `kernel` object (whatever its decorators made of it).

    Raises SourceTreeError for a module or kernel that is not there, SliceError for a
    needed statement that fails."""
    tree = SourceTree(root)
    tree.kernel(module_name, kernel)  # a located error before anything runs
    loader = SlicedLoader(tree)
    loader.install()
    if module_name in sys.modules:
        module = sys.modules[module_name]
    elif loader.claims(module_name):
        module = importlib.import_module(module_name)
    else:  # a kernel file named like a standard module: keep it out of sys.modules
        module = loader.empty_module(module_name)
    source = tree.module(module_name)
    loader.need(module, source, kernel)
    return module, module.__dict__[kernel]
