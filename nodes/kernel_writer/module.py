"""Assemble lifted entries into one `kernel.rs`: a `#[cutile::module]` with one
`#[cutile::entry]` per structural variant (or literal-specialised entry)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nodes.kernel_writer.lifter import INDENT, LiftedKernel


@dataclass(frozen=True)
class GenericParam:
    name: str
    kind: str  # "type" (E: ElementType) or "const" (i32)

    @property
    def declaration(self) -> str:
        return f"{self.name}: ElementType" if self.kind == "type" else f"const {self.name}: i32"


@dataclass
class EntryCode:
    """One entry function, its generic parameters and the text it carries."""

    name: str
    lifted: LiftedKernel
    generics: list[GenericParam] = field(default_factory=list)
    doc: list[str] = field(default_factory=list)
    body_text: list[str] = field(default_factory=list)


def module_name(kernel: str) -> str:
    return f"{kernel.removesuffix('_kernel')}_port"


def render_entry(entry: EntryCode) -> list[str]:
    lifted = entry.lifted
    attribute = f"#[cutile::entry({lifted.entry_hints or ''})]"
    generics = ""
    if entry.generics:
        generics = "<" + ", ".join(g.declaration for g in entry.generics) + ">"
    allowed = ["clippy::too_many_arguments", "unused_variables"]
    if any(g.kind == "const" and g.name != g.name.upper() for g in entry.generics):
        # A const generic keeps its constant's name as the source gives it (`block_n`).
        allowed.append("non_upper_case_globals")
    lines = [f"{INDENT}/// {line}".rstrip() for line in entry.doc]
    lines += [
        f"{INDENT}{attribute}",
        f"{INDENT}#[allow({', '.join(allowed)})]",
        f"{INDENT}unsafe fn {entry.name}{generics}(",
    ]
    lines += [f"{INDENT * 2}{param}," for param in lifted.params]
    lines.append(f"{INDENT}) {{")
    lines += [f"{INDENT}{line}" if line else "" for line in entry.body_text or lifted.body]
    lines.append(f"{INDENT}}}")
    return lines


FACT_HELPER_LINES = [
    '/// `x` with the launch fact "divisible by D" stated when the launch has one',
    "/// (D > 1), as cuTile Python states it; compiles to one `assume` or to nothing.",
    "fn divisible<T, const D: i32>(x: T) -> T {",
    f"{INDENT}if D > 1 {{",
    f"{INDENT * 2}unsafe {{ assume_div_by::<_, D>(x) }}",
    f"{INDENT}}} else {{",
    f"{INDENT * 2}x",
    f"{INDENT}}}",
    "}",
]


def _grid_op(name: str, op: str, doc: str) -> list[str]:
    component = "Tile<E, { [] }>"
    return [
        f"/// {doc}, as plain tiles: cutile-rs's `{op}()` adds",
        "/// `assume bounded<0, ?>` to each component, which cuTile Python does not.",
        f'#[cuda_tile::op(name = "cuda_tile.{op}", since = "V13_2", params = [])]',
        f"fn {name}<E: ElementType>() -> ({component}, {component}, {component}) {{",
        f"{INDENT}unreachable!()",
        "}",
    ]


def _trunci_plain(rank: int) -> list[str]:
    return [
        "/// `trunci` without overflow flags: `trunci(x, overflow::None)` omits the",
        "/// attribute cutile-rs's own bytecode writer requires.",
        '#[cuda_tile::op(name = "cuda_tile.trunci", since = "V13_2", params = ["from"], '
        'named_attributes = ["overflow=none"])]',
        f"fn trunci_plain_r{rank}<EIn: ElementType, EOut: ElementType, const S: [i32; {rank}]>(",
        f"{INDENT}_from: Tile<EIn, S>,",
        ") -> Tile<EOut, S> {",
        f"{INDENT}unreachable!()",
        "}",
    ]


def _load_ptr_padded(rank: int) -> list[str]:
    return [
        "/// `load_ptr_tko` with a padding tile, as the reference passes it:",
        "/// cutile-rs's own takes a scalar and broadcasts it inside the load.",
        '#[cuda_tile::op(name = "cuda_tile.load_ptr_tko", since = "V13_2", params = ["source"])]',
        "#[allow(clippy::too_many_arguments)]",
        f"unsafe fn load_ptr_padded_r{rank}<",
        f"{INDENT}E: ElementType,",
        f"{INDENT}P: PointerTo<E>,",
        f"{INDENT}const S: [i32; {rank}],",
        f"{INDENT}O: ordering::LoadMode,",
        f"{INDENT}Sc: scope::Mode,",
        f"{INDENT}const CYCLES: i32,",
        ">(",
        f"{INDENT}_source: PointerTile<P, S>,",
        f"{INDENT}_memory_ordering: O,",
        f"{INDENT}_memory_scope: Option<Sc>,",
        f"{INDENT}_mask: Option<Tile<bool, S>>,",
        f"{INDENT}_padding_value: Option<Tile<E, S>>,",
        f"{INDENT}_token: Option<Token>,",
        f"{INDENT}_latency: Latency<CYCLES>,",
        ") -> (Tile<E, S>, Token) {",
        f"{INDENT}unreachable!()",
        "}",
    ]


def _constant_float(rank: int) -> list[str]:
    return [
        "/// `constant` of the element type `E` from one f64 value, which cutile-rs",
        "/// rounds straight into E's type (cuTile's value in every dtype, bf16's too).",
        '#[cuda_tile::op(name = "cuda_tile.constant", since = "V13_2", params = [], '
        'attribute_params = ["value:dense"])]',
        "#[allow(unused_variables)]",
        f"fn constant_float_r{rank}<E: ElementType, const S: [i32; {rank}]>(",
        f"{INDENT}value: f64,",
        f"{INDENT}shape: Shape<S>,",
        ") -> Tile<E, S> {",
        f"{INDENT}unreachable!()",
        "}",
    ]


def _constant_bits(width: str, rank: int) -> list[str]:
    value_type = "i64" if width == "64" else "i32"
    return [
        "/// `constant` from the signed spelling of its bits: cutile-rs writes 0 for",
        "/// unsigned literals past the signed max, and `true` for `false`.",
        '#[cuda_tile::op(name = "cuda_tile.constant", since = "V13_2", params = [], '
        'attribute_params = ["value:dense"])]',
        "#[allow(unused_variables)]",
        f"fn constant_bits{width}_r{rank}<E: ElementType, const S: [i32; {rank}]>(",
        f"{INDENT}value: {value_type},",
        f"{INDENT}shape: Shape<S>,",
        ") -> Tile<E, S> {",
        f"{INDENT}unreachable!()",
        "}",
    ]


_PREDICATES = ", ".join(
    f"{mode}: comparison_predicate=#cuda_tile.cmp_predicate<{predicate}>"
    for mode, predicate in (
        ("Equal", "equal"),
        ("NotEqual", "not_equal"),
        ("LessThan", "less_than"),
        ("LessThanOrEqual", "less_than_or_equal"),
        ("GreaterThan", "greater_than"),
        ("GreaterThanOrEqual", "greater_than_or_equal"),
    )
)


def _ptr_to_int(rank: int) -> list[str]:
    return [
        "/// `ptr_to_int` to i64 addresses: cutile-rs's own types the result as the",
        "/// pointee type, which the dialect's op does not.",
        '#[cuda_tile::op(name = "cuda_tile.ptr_to_int", since = "V13_2", params = ["source"])]',
        f"fn ptr_to_int_r{rank}<E: ElementType, const S: [i32; {rank}]>(",
        f"{INDENT}_source: PointerTile<*mut E, S>,",
        ") -> Tile<i64, S> {",
        f"{INDENT}unreachable!()",
        "}",
    ]


def _cmpi_signed(sign: str, rank: int) -> list[str]:
    return [
        f"/// `cmpi` stating `{sign}` itself: cutile-rs's own infers the signedness",
        "/// from the operands' Rust type, which another op of the value fixes.",
        '#[cuda_tile::op(name = "cuda_tile.cmpi", since = "V13_2", params = ["lhs", "rhs"], '
        f'static_params = ["predicate={{{_PREDICATES}}}"], '
        f'named_attributes = ["signedness={sign}"])]',
        "#[allow(unused_variables)]",
        f"fn cmpi_{sign}_r{rank}<E: ElementType, const S: [i32; {rank}], P: predicate::Mode>(",
        f"{INDENT}lhs: Tile<E, S>,",
        f"{INDENT}rhs: Tile<E, S>,",
        f"{INDENT}predicate: P,",
        ") -> Tile<bool, S> {",
        f"{INDENT}unreachable!()",
        "}",
    ]


def module_item(name: str) -> list[str]:
    """The module-level declaration a lifted body relies on."""
    if name == "tile_block_id":
        return _grid_op(name, "get_tile_block_id", "The tile block's id")
    if name == "num_tile_blocks":
        return _grid_op(name, "get_num_tile_blocks", "The grid's size")
    if name.startswith("trunci_plain_r"):
        return _trunci_plain(int(name.removeprefix("trunci_plain_r")))
    if name.startswith("constant_float_r"):
        return _constant_float(int(name.removeprefix("constant_float_r")))
    if name.startswith("constant_bits"):
        width, _, rank = name.removeprefix("constant_bits").partition("_r")
        return _constant_bits(width, int(rank))
    if name.startswith("load_ptr_padded_r"):
        return _load_ptr_padded(int(name.removeprefix("load_ptr_padded_r")))
    if name == "tileir":
        # Strided and gather/scatter views are in cutile-rs's raw Tile IR surface only;
        # its view types are variadic structs, whose names a glob import reaches.
        return ["use cutile::tileir::*;"]
    if name.startswith("ptr_to_int_r"):
        return _ptr_to_int(int(name.removeprefix("ptr_to_int_r")))
    if name.startswith(("cmpi_signed_r", "cmpi_unsigned_r")):
        sign, _, rank = name.removeprefix("cmpi_").partition("_r")
        return _cmpi_signed(sign, int(rank))
    if name == "divisible":
        return FACT_HELPER_LINES
    if name == "generic_value":
        return [
            "/// A const generic's value as a constant at the call site (a bare `V`",
            "/// reuses the one cutile-rs materialises at the top of the entry).",
            "fn generic_value<const V: i32>() -> i32 {",
            f"{INDENT}V",
            "}",
        ]
    if name == "loop_bound":
        return [
            "/// A const generic's value as a loop bound whose value cutile-rs does not",
            "/// track: from a known bound it assumes the loop variable's range, which",
            "/// the reference does not state (the shift by zero folds away in tileiras).",
            "#[allow(clippy::identity_op)]",
            "fn loop_bound(value: i32) -> i32 {",
            f"{INDENT}value << 0i32",
            "}",
        ]
    raise KeyError(name)


def render_module(kernel: str, header: list[str], entries: list[EntryCode]) -> str:
    lines = [f"//! {line}".rstrip() for line in header]
    lines += [
        "",
        "#[cutile::module]",
        f"pub mod {module_name(kernel)} {{",
        f"{INDENT}use cutile::core::*;",
    ]
    items = {item for entry in entries for item in entry.lifted.module_items}
    if any("divisible::<" in line for entry in entries for line in entry.body_text):
        items.add("divisible")
    for item in sorted(items):
        lines.append("")
        lines += [f"{INDENT}{line}" for line in module_item(item)]
    for entry in entries:
        lines.append("")
        lines += render_entry(entry)
    lines.append("}")
    return "\n".join(lines) + "\n"
