"""Rust element types for every IR value: signedness and the dtype generic.

Tile IR integers are signless; cutile-rs picks `signed` or `unsigned` for
`cmpi`, `divi`, `remi`, `mini`, `maxi`, `shri`, `exti` and `itof` from the
Rust element type of the operands. So values are grouped into classes that
must share one Rust type (the operands and result of an elementwise op, a
loop's carried value across iterations, ...) and each op that states a
signedness pins its class. A class pinned both ways cannot be typed in Rust:
the op is Blocked, except for `cmpi`: a compare that disagrees with its
operands' class states its signedness itself (a declared op), so compares pin
only classes no other op has pinned.

The same classes carry the dtype generic: the class of every array element
that follows the configuration's dtype is spelt `E`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from nodes.kernel_writer.errors import Blocked
from nodes.kernel_writer.rust_types import is_integer, rust_element, tile_info
from tileir.ir import Entry, Op
from tileir.resolve import Resolved
from tileir.types import parse_tensor_view, parse_view

SAME_TYPE_OPS = frozenset(
    {
        "addi",
        "subi",
        "muli",
        "mulhii",
        "divi",
        "remi",
        "mini",
        "maxi",
        "andi",
        "ori",
        "xori",
        "shli",
        "shri",
        "negi",
        "absi",
        "addf",
        "subf",
        "mulf",
        "divf",
        "remf",
        "maxf",
        "minf",
        "fma",
        "negf",
        "absf",
        "exp",
        "exp2",
        "log",
        "log2",
        "rsqrt",
        "sqrt",
        "tanh",
        "sin",
        "cos",
        "floor",
        "ceil",
        "pow",
        "fpowf",
        "atan2",
    }
)
SHAPE_OPS = frozenset({"reshape", "broadcast", "permute", "extract", "assume", "offset"})
SIGNED_OPERAND_OPS = frozenset({"cmpi", "divi", "remi", "mini", "maxi", "shri", "exti", "itof"})


@dataclass
class _Class:
    sign: str | None = None
    sign_op: Op | None = None
    generic: bool = False


@dataclass
class ElementTypes:
    """The Rust element type of each value id (tiles, pointer tiles, views)."""

    rust: dict[int, str] = field(default_factory=dict)
    # `cmpi` ops (by id) whose signedness differs from their operands' Rust type.
    explicit_compares: dict[int, str] = field(default_factory=dict)

    def of(self, value: int) -> str:
        return self.rust[value]


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, value: int) -> int:
        self.parent.setdefault(value, value)
        root = value
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[value] != root:
            self.parent[value], value = root, self.parent[value]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def _ir_element(type_text: str) -> str | None:
    info = tile_info(type_text)
    if info is not None:
        return info.element
    view = parse_view(type_text)
    if view is not None and view.tensor_view is not None:
        return view.tensor_view.element
    tensor = parse_tensor_view(type_text)
    return tensor.element if tensor is not None else None


class _Inference:
    def __init__(self, resolved: Resolved) -> None:
        self.resolved = resolved
        self.sets = _UnionFind()

    def link(self, values: list[int]) -> None:
        for other in values[1:]:
            self.sets.union(values[0], other)

    def collect(self, op: Op) -> None:
        operands = self.resolved.operand_ids(op)
        results = self.resolved.result_ids(op)
        name = op.name
        if name in SAME_TYPE_OPS:
            self.link(operands + results)
        elif name in ("cmpi", "cmpf"):
            self.link(operands)
        elif name in SHAPE_OPS and operands and results:
            self.link([operands[0], results[0]])
        elif name == "select":
            self.link([operands[1], operands[2], *results])
        elif name in ("make_tensor_view", "make_partition_view"):
            self.link([operands[0], results[0]])
        elif name in ("load_view_tko", "load_ptr_tko", "atomic_rmw_tko"):
            self.link([operands[0], results[0]])
            if name == "load_ptr_tko":
                # The padding tile, after the optional mask (i1): the result's type.
                padding = [v for v in operands[1:] if self._is_tile(v)]
                self.link([results[0], *padding])
            if name == "atomic_rmw_tko":
                self.link([operands[0], operands[1]])
        elif name in ("store_view_tko", "store_ptr_tko"):
            self.link([operands[0], operands[1]])
        elif name in ("mmaf", "mmai"):
            self.link([operands[0], operands[1]])
            self.link([operands[2], results[0]])
        elif name == "mmaf_scaled":
            # lhs, rhs, acc, lhs_scale, rhs_scale: one input type, one scale type.
            self.link([operands[0], operands[1]])
            self.link([operands[2], results[0]])
            self.link([operands[3], operands[4]])
        self.collect_regions(op, operands, results)

    def _is_tile(self, value: int) -> bool:
        info = tile_info(self.resolved.type_of(value))
        return info is not None and info.element != "i1"

    def collect_regions(self, op: Op, operands: list[int], results: list[int]) -> None:
        if op.name in ("reduce", "scan"):
            body = op.regions[0].blocks[0]
            args = self.resolved.block_args[id(body)]
            self.link([operands[0], results[0], *args])
            for inner in op.regions[0].ops:
                if inner.name == "yield":
                    self.link([results[0], *self.resolved.operand_ids(inner)])
        elif op.name in ("for", "loop"):
            body = op.regions[0].blocks[0]
            args = self.resolved.block_args[id(body)]
            inits = operands[3:] if op.name == "for" else operands
            carried = args[1:] if op.name == "for" else args
            if op.name == "for":
                self.link([args[0], operands[0], operands[1], operands[2]])
            for index, init in enumerate(inits):
                self.link([init, carried[index], results[index]])
            for inner in op.walk():
                if inner.name in ("continue", "break") and self._targets(op, inner):
                    for index, value in enumerate(self.resolved.operand_ids(inner)):
                        self.link([results[index], value])
        elif op.name == "if":
            for region in op.regions:
                for inner in region.ops:
                    if inner.name == "yield":
                        for index, value in enumerate(self.resolved.operand_ids(inner)):
                            self.link([results[index], value])

    @staticmethod
    def _targets(loop: Op, terminator: Op) -> bool:
        """Whether `terminator` (continue/break) belongs to `loop`, not a nested loop."""

        def search(op: Op) -> bool | None:
            for region in op.regions:
                for inner in region.ops:
                    if inner is terminator:
                        return True
                    if inner.name in ("for", "loop"):
                        if any(x is terminator for x in inner.walk()):
                            return False
                        continue
                    found = search(inner)
                    if found is not None:
                        return found
            return None

        return bool(search(loop))


def _pin(classes: dict[int, _Class], root: int, sign: str, op: Op) -> None:
    cls = classes.setdefault(root, _Class())
    if cls.sign is None:
        cls.sign, cls.sign_op = sign, op
    elif cls.sign != sign:
        raise Blocked(
            op.name,
            op.location or f"IR line {op.line}",
            f"one value is used both {cls.sign} (by `{cls.sign_op.name if cls.sign_op else '?'}`) "
            f"and {sign}; a cutile-rs value has one integer signedness",
        )


def infer_elements(
    entry: Entry,
    resolved: Resolved,
    param_signs: dict[int, str],
    generic_values: set[int],
) -> ElementTypes:
    """Rust element types. `param_signs` pins entry arguments (`signed` or
    `unsigned`); `generic_values` are values whose class is spelt `E`."""
    inference = _Inference(resolved)
    ops = list(entry.walk())
    for op in ops:
        inference.collect(op)
    find = inference.sets.find
    classes: dict[int, _Class] = {}
    for op in ops:
        if op.name != "cmpi":
            _pin_op(op, resolved, classes, find)
    explicit_compares = _pin_compares(ops, resolved, classes, find)
    # An argument's dtype only names its bits (the C ABI passes them as they
    # are), so it decides the sign only where no op does.
    for value, sign in param_signs.items():
        cls = classes.setdefault(find(value), _Class())
        if cls.sign is None:
            cls.sign = sign
    for value in generic_values:
        classes.setdefault(find(value), _Class()).generic = True
    out = ElementTypes(explicit_compares=explicit_compares)
    for info in resolved.values:
        element = _ir_element(info.type)
        if element is None:
            continue
        cls = classes.get(find(info.id), _Class())
        if cls.generic:
            out.rust[info.id] = "E"
        elif is_integer(element):
            out.rust[info.id] = rust_element(element, unsigned=cls.sign == "unsigned")
        else:
            out.rust[info.id] = rust_element(element)
    return out


def _pin_op(
    op: Op, resolved: Resolved, classes: dict[int, _Class], find: Callable[[int], int]
) -> None:
    sign = op.attributes.get("signedness")
    operands = resolved.operand_ids(op)
    if sign is not None and op.name in SIGNED_OPERAND_OPS and operands:
        _pin(classes, find(operands[0]), sign, op)
    if op.name == "ftoi" and sign is not None:
        _pin(classes, find(resolved.result_ids(op)[0]), sign, op)
    if op.name == "mmai":
        # cutile-rs's mmai accumulates in `Tile<i32, _>`; the operands' signedness
        # is the op's own words, not their Rust type.
        _pin(classes, find(operands[2]), "signed", op)


def _pin_compares(
    ops: list[Op], resolved: Resolved, classes: dict[int, _Class], find: Callable[[int], int]
) -> dict[int, str]:
    """Pin free classes by their compares; return the compares (op id -> sign)
    whose signedness their operands' class, pinned by another op, contradicts."""
    explicit: dict[int, str] = {}
    for op in ops:
        sign = op.attributes.get("signedness")
        operands = resolved.operand_ids(op)
        if op.name != "cmpi" or sign is None or not operands:
            continue
        cls = classes.setdefault(find(operands[0]), _Class())
        if cls.sign is None:
            cls.sign, cls.sign_op = sign, op
        elif cls.sign != sign:
            explicit[id(op)] = sign
    return explicit
