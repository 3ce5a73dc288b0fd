"""Producer launches: the operator's earlier kernels that make a kernel's inputs.

A stage of a multi-kernel operator reads what the stages before it wrote: MoE
block alignment counts tokens per expert, takes prefix sums, then scatters each
token to `offset + count`. Random arrays of the right shapes are not inputs such
a stage can meet: its writes collide, and no two launches (the reference's
included) agree. The host code says where the inputs come from: in the function
that launches the kernel, the `ct.launch` calls before it that write a variable
the kernel reads (or that an earlier producer reads). The launches recorded in
the same test give each producer's grid, values and scratch shapes. Syntax only:
nothing runs.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from nodes.spec_writer.roles import array_roles
from schemas.launch_capture import BoolArg, FloatArg, IntArg, LaunchRecord, TensorArg
from toolchain.source_tree import SourceTree, SourceTreeError

# Host calls that allocate a zeroed array, and the views that keep its storage.
ZEROED_ALLOCATIONS: Final = frozenset({"zeros", "zeros_like", "new_zeros"})
VIEWS: Final = frozenset({"reshape", "view", "flatten", "contiguous", "view_as", "ravel"})


@dataclass(frozen=True)
class HostLaunch:
    """One `ct.launch(stream, grid, kernel, (args...))` of a host function."""

    kernel: str
    line: int
    arguments: tuple[ast.expr, ...]


@dataclass(frozen=True)
class ProducerPlan:
    """A kernel's producers, from its host function: for each, in launch order, its
    name and, per argument position, the kernel parameter it shares (None: its own);
    and the kernel's parameters that the host zeroes before the producers write them."""

    producers: tuple[tuple[str, tuple[str | None, ...]], ...]
    zeroed: frozenset[str]


def _launch(node: ast.AST) -> HostLaunch | None:
    match node:
        case ast.Call(
            func=ast.Attribute(attr="launch"),
            args=[_, _, ast.Name(id=kernel), ast.Tuple(elts=arguments)],
        ):
            return HostLaunch(kernel, node.lineno, tuple(arguments))
    return None


def _host_functions(tree: ast.Module) -> list[tuple[ast.FunctionDef, list[HostLaunch]]]:
    """Each module-level function with its launches in source order."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            launches = [hit for sub in ast.walk(node) if (hit := _launch(sub)) is not None]
            if launches:
                found.append((node, sorted(launches, key=lambda launch: launch.line)))
    return found


def _name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _zeroed(function: ast.FunctionDef, variable: str, depth: int = 0) -> bool:
    """Whether the host binds `variable` to a zeroed allocation, or a view of one."""
    if depth > 8:
        return False
    for node in ast.walk(function):
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and _name(node.targets[0]) == variable
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
        ):
            continue
        call = node.value.func
        if call.attr in ZEROED_ALLOCATIONS:
            return True
        source = _name(call.value)
        if call.attr in VIEWS and source is not None:
            return _zeroed(function, source, depth + 1)
    return False


def producer_plan(
    tree: SourceTree, module: str, kernel: str, params: Sequence[str], reads: set[str]
) -> ProducerPlan | None:
    """The producers of `kernel` (whose parameters are `params`, of which it reads the
    arrays `reads`), from the one host function of `module` that launches it; None
    when no function or more than one does, or nothing before it writes what it reads."""
    source = tree.module(module)
    hosts = [
        (function, launches)
        for function, launches in _host_functions(source.tree)
        if any(launch.kernel == kernel for launch in launches)
    ]
    if len(hosts) != 1:
        return None
    function, launches = hosts[0]
    own_index = next(i for i, launch in enumerate(launches) if launch.kernel == kernel)
    own = launches[own_index]
    shared = {
        name: param
        for node, param in zip(own.arguments, params, strict=False)
        if (name := _name(node)) is not None
    }
    needed = {name for name, param in shared.items() if param in reads}
    taken: list[HostLaunch] = []
    written_by_producers: set[str] = set()
    for launch in reversed(launches[:own_index]):
        definition = source.function(launch.kernel)
        if definition is None:
            continue
        positional = [a.arg for a in definition.args.args]
        named = {
            param: name
            for param, node in zip(positional, launch.arguments, strict=False)
            if (name := _name(node)) is not None
        }
        try:
            roles = array_roles(tree, module, launch.kernel, list(named))
        except SourceTreeError:
            return None
        writes = {name for param, name in named.items() if roles[param] != "in"}
        if not writes & needed:
            continue
        taken.insert(0, launch)
        written_by_producers |= writes & needed
        needed |= {name for param, name in named.items() if roles[param] != "out"}
    if not taken:
        return None
    return ProducerPlan(
        producers=tuple(
            (launch.kernel, tuple(shared.get(_name(node) or "") for node in launch.arguments))
            for launch in taken
        ),
        zeroed=frozenset(shared[name] for name in written_by_producers if _zeroed(function, name)),
    )


def _tensor(record: LaunchRecord, index: int) -> TensorArg | None:
    arg = record.args[index]
    return arg if isinstance(arg, TensorArg) else None


def producer_launches(
    plan: ProducerPlan,
    record: LaunchRecord,
    earlier: Sequence[LaunchRecord],
    arrays: set[str],
) -> list[dict[str, Any]] | None:
    """The spec's `producers` of the configuration `record` (its kernel's arrays that
    producers may write: `arrays`): each producer's last launch before it in the same
    test (`earlier`, in recording order), its arguments mapped to the configuration's
    arrays, zeroed scratch arrays and recorded values. None when a producer has no
    such launch, or a shared array was recorded with another shape or dtype."""
    if record.test is None:
        return None
    own = {param: index for index, param in enumerate(record.params)}
    launches: list[dict[str, Any]] = []
    for kernel, sharing in plan.producers:
        found = next(
            (r for r in reversed(earlier) if r.kernel == kernel and r.test == record.test),
            None,
        )
        if found is None or len(found.args) != len(sharing):
            return None
        arguments: list[dict[str, Any]] = []
        for index, param in enumerate(sharing):
            tensor = _tensor(found, index)
            if param in arrays and tensor is not None:
                mine = _tensor(record, own[param])
                if mine is None or (mine.shape, mine.dtype) != (tensor.shape, tensor.dtype):
                    return None
                arguments.append({"array": param})
            elif tensor is not None:
                arguments.append({"scratch": {"shape": list(tensor.shape), "dtype": tensor.dtype}})
            elif isinstance(value := found.args[index], IntArg | FloatArg | BoolArg):
                arguments.append({"value": value.value})
            else:
                return None  # a list or another argument a producer cannot be given
        grid = list(found.grid)
        while len(grid) > 1 and grid[-1] == 1:
            grid.pop()
        launches.append({"kernel": kernel, "grid": grid, "arguments": arguments})
    return launches
