"""The port spec: everything tileport must know about one kernel to port it.

A port spec (`<name>.port.yaml` beside the kernel source) names the kernel,
its parameters, its variants and how a launch dispatches between them, the
launch grid, the shapes it is tested and measured on, the function that
defines correct output and the tolerances it is held to. docs/PORT_SPEC.md
explains every field with an example; docs/port-spec.schema.json is the JSON
Schema (`python -m schemas.port_spec --json-schema`).

Expressions (dispatch conditions, grid, shapes, constant values) use the small
language of `schemas.spec_expr`: arithmetic, comparisons, `and`/`or`/`not`,
`a if c else b`, and the functions `cdiv`, `next_pow2`, `min`, `max`, over the
dimension symbols of a configuration, the constants and scalars, `dtype` (the
configuration's dtype name) and `num_sms`.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self, get_args

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from schemas.run_layout import RunPathError, check_run_relative
from schemas.spec_expr import ExprError, Value, evaluate, evaluate_int, parse

SPEC_VERSION = 1
DEFAULT_NUM_SMS = 132  # an H200; a configuration may override it

DTypeName = Literal[
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "tfloat32",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e8m0fnu",
]

# Bytes per element; the launch-time alignment facts are counted in bytes.
ITEMSIZE: dict[str, int] = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e8m0fnu": 1,
    "int16": 2,
    "uint16": 2,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "float32": 4,
    "tfloat32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
}

FLOAT_DTYPES = frozenset(
    d for d in get_args(DTypeName) if d.startswith(("float", "bfloat", "tfloat"))
)
# Floats with an exponent only (block scales: powers of two, no sign, no zero).
EXPONENT_DTYPES = frozenset({"float8_e8m0fnu"})

# cuTile Python dtypes that no spec names, each with why: its reproducer is in
# docs/UPSTREAM_GAPS.md. A spec naming one is refused with this text rather than
# with the list of the names it may use.
REFUSED_DTYPES: Final[dict[str, str]] = {
    "float4_e2m1fn": "cuTile Python 1.7 launches no array of it (docs/UPSTREAM_GAPS.md "
    "G22); declare the packed values, two a byte, a uint8 array of half the length and "
    "unpack them in the kernel (ct.unpack_from_bytes(pairs, ct.float4_e2m1fn)), which "
    "ports for sm_100",
    "float8_e5m3fnu": "cuTile Python 1.7 and cutile-rs 0.5.0 write it only at bytecode "
    "13.4 for sm_107 and later, and ports are proven at 13.3 on sm_90 and sm_100 "
    "(docs/UPSTREAM_GAPS.md G23); nor does a cuTile launch take an array of it (G22)",
}


def _not_refused(value: object) -> object:
    if isinstance(value, str) and value in REFUSED_DTYPES:
        raise ValueError(f"{value} is not a spec dtype: {REFUSED_DTYPES[value]}")
    return value


# A dtype a spec names: one of DTypeName, and a refused one says why.
SpecDType = Annotated[DTypeName, BeforeValidator(_not_refused)]

# The GPUs a port is proven for (its reference exported, its SASS compared).
GpuTarget = Literal["sm_90", "sm_100"]

IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
MODULE_NAME = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"


def _check_expr(text: str) -> str:
    try:
        parse(text)
    except ExprError as exc:
        raise ValueError(str(exc)) from None
    return text


Expr = Annotated[
    str,
    AfterValidator(_check_expr),
    Field(description="An expression of the port-spec language (see docs/PORT_SPEC.md)."),
]
IntOrExpr = int | Expr
ConstValue = bool | int | float | Expr
Name = Annotated[str, Field(pattern=IDENTIFIER)]


# Marks a field naming a file or folder (`json_schema_extra`): the service checks
# each such field of a submitted spec (its intake lists them).
SPEC_PATH: Final[dict[str, Any]] = {"spec_path": True}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ArrayInit(_Strict):
    """How the correctness harness fills an array before a launch."""

    kind: Literal["randn", "uniform", "randint", "arange", "partition", "zeros", "ones"] = Field(
        description="randn: normal(0, 1); uniform: [low, high); randint: integers in "
        "[low, high); arange: 0, 1, 2, ... over the flattened array; partition: sorted "
        "offsets 0 = o[0] <= ... <= o[-1] = high of a random split of `high` items (MoE "
        "expert offsets, cu_seqlens); zeros; ones."
    )
    low: int | float | Expr | None = Field(None, description="Lower bound (uniform, randint).")
    high: int | float | Expr | None = Field(
        None, description="Upper bound (uniform, randint), or the total (partition)."
    )
    special_value: int | float | None = Field(
        None,
        description="A value the kernel treats specially (an ignore_index, a padding id) "
        "written over a random special_fraction of the elements after filling.",
    )
    special_fraction: float = Field(
        0.0, ge=0.0, le=1.0, description="Fraction of elements set to special_value."
    )

    @model_validator(mode="after")
    def _bounds_for_ranged_kinds(self) -> Self:
        if self.kind in ("uniform", "randint") and (self.low is None or self.high is None):
            raise ValueError(f"init kind {self.kind!r} needs both low and high")
        if self.kind == "partition" and self.high is None:
            raise ValueError("init kind 'partition' needs high (the total)")
        if (self.special_value is None) != (self.special_fraction == 0.0):
            raise ValueError("special_value and a non-zero special_fraction go together")
        return self


class ArrayParam(_Strict):
    """A kernel parameter that is an array (or, with list_length, a list of arrays)."""

    rank: int = Field(ge=0, le=8, description="Number of dimensions.")
    shape: list[IntOrExpr] = Field(
        description="One entry per dimension: an integer, a dimension symbol bound by "
        "each configuration's `dims`, or an expression over symbols and constants."
    )
    dtypes: list[SpecDType] = Field(
        min_length=1,
        description="The element types allowed. float4_e2m1fn values travel packed, two a "
        "byte, in a uint8 array that the kernel unpacks (ct.unpack_from_bytes).",
    )
    role: Literal["in", "out", "inout"] = Field(
        description="in: read only; out: written only; inout: read and written."
    )
    layout: Literal["contiguous", "permuted"] = Field(
        "contiguous",
        description="contiguous: row-major, last dimension unit stride. permuted: a "
        "row-major buffer viewed with its dimensions reordered (see memory_order).",
    )
    memory_order: list[int] | None = Field(
        None,
        description="For layout=permuted: the dimensions from outermost to innermost in "
        "memory, e.g. [1, 0] for the transpose of a row-major matrix.",
    )
    list_length: IntOrExpr | None = Field(
        None,
        description="When set, the parameter is a list of this many arrays, each of the "
        "given shape and dtype (as a grouped GEMM takes one weight per expert).",
    )
    init: ArrayInit | None = Field(
        None,
        description="How the correctness harness fills the array; default randn for "
        "float inputs, randint(0, 16) for integer inputs, zeros for outputs.",
    )
    description: str = Field("", description="Free text for readers.")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if len(self.shape) != self.rank:
            raise ValueError(f"shape has {len(self.shape)} entries but rank is {self.rank}")
        if self.layout == "permuted":
            if self.memory_order is None:
                raise ValueError("layout 'permuted' needs memory_order")
            if sorted(self.memory_order) != list(range(self.rank)):
                raise ValueError(f"memory_order must be a permutation of 0..{self.rank - 1}")
        elif self.memory_order is not None:
            raise ValueError("memory_order is only meaningful with layout 'permuted'")
        if len(set(self.dtypes)) != len(self.dtypes):
            raise ValueError("dtypes lists a dtype twice")
        return self

    def default_init(self, dtype: str) -> ArrayInit:
        if self.init is not None:
            return self.init
        if self.role == "out":
            return ArrayInit(kind="zeros")
        if dtype in EXPONENT_DTYPES:
            return ArrayInit(kind="uniform", low=0.125, high=8)  # scales around 1
        if dtype in FLOAT_DTYPES:
            return ArrayInit(kind="randn")
        return ArrayInit(kind="randint", low=0, high=16)


class ScalarParam(_Strict):
    """A runtime scalar parameter (passed by value at each launch)."""

    dtype: Literal["int32", "float32", "bool"] = Field(
        description="The scalar's type in the kernel signature: a cuTile launch passes a "
        "Python int as int32, a float as float32 and a bool as bool, and takes no others."
    )
    default: bool | int | float | Expr | None = Field(
        None, description="Value (or expression) used when a configuration gives none."
    )
    description: str = Field("", description="Free text for readers.")


class ConstantParam(_Strict):
    """A `ct.Constant` parameter: baked into each compiled specialisation."""

    type: Literal["int", "float", "bool"] = Field(description="The constant's Python type.")
    default: ConstValue | None = Field(
        None,
        description="Value (or expression) used when neither the configuration nor the "
        "variant binds the constant.",
    )
    description: str = Field("", description="Free text for readers.")


class Hints(_Strict):
    """Compiler hints a variant is compiled with (`kernel.replace_hints`)."""

    occupancy: int | None = Field(None, ge=1, le=32, description="Expected CTAs per SM.")
    num_ctas: int | None = Field(None, ge=1, le=16, description="CTAs per cluster (2^k).")
    num_worker_warps: int | None = Field(None, ge=1, le=32, description="Worker warps (2^k).")

    @model_validator(mode="after")
    def _powers_of_two(self) -> Self:
        for field in ("num_ctas", "num_worker_warps"):
            value = getattr(self, field)
            if value is not None and value & (value - 1):
                raise ValueError(f"{field} must be a power of two, got {value}")
        return self

    def as_kwargs(self) -> dict[str, int]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class Variant(_Strict):
    """One compiled form of the kernel, chosen per launch by its dispatch condition."""

    name: Name = Field(description="Names the variant's output files (<name>.bytecode ...).")
    when: Expr = Field(
        "True",
        description="Dispatch condition over the configuration's dims, dtype, num_sms and "
        "literal constant bindings; the first variant whose condition holds is launched.",
    )
    constants: dict[str, ConstValue] = Field(
        default_factory=dict, description="Constant values (or expressions) of this variant."
    )
    hints: Hints | None = Field(None, description="Compiler hints; none keeps the kernel's.")
    grid: list[IntOrExpr] | None = Field(
        None, min_length=1, max_length=3, description="Overrides the spec's launch grid."
    )
    representative: str | None = Field(
        None,
        description="Test configuration whose shapes give the facts of the reference "
        "export; default: the first test configuration that dispatches here.",
    )
    reference_bytecode: str | None = Field(
        None,
        min_length=1,
        description="A Tile IR bytecode file (a plain relative path below the spec's "
        "folder) that is the variant's reference instead of an export: what cuTile Python "
        "writes under CUDA_TILE_DUMP_BYTECODE, or a Triton Tile IR build. It must be "
        "bytecode 13.3, compiled for the representative configuration; nothing else is "
        "compiled from it.",
        json_schema_extra=SPEC_PATH,
    )
    description: str = Field("", description="Free text for readers.")

    @field_validator("reference_bytecode")
    @classmethod
    def _below_the_spec(cls, value: str | None) -> str | None:
        """The dump travels with the spec: no absolute path, no `..`, no backslash."""
        if value is not None:
            try:
                check_run_relative(value)
            except RunPathError:
                message = f"{value!r} is not a plain relative path below the spec's folder"
                raise ValueError(message) from None
        return value


class ScratchArray(_Strict):
    """An array a producer launch needs that the kernel itself does not take: zeroed."""

    shape: list[Annotated[int, Field(ge=0)]] = Field(min_length=1, description="Its extents.")
    dtype: SpecDType = Field(description="Its element type.")


class ProducerArgument(_Strict):
    """One argument of a producer launch: exactly one of an array of this spec (the
    same buffer the kernel then receives), a zeroed scratch array, or a value."""

    array: Name | None = Field(None, description="An input or inout array of this spec.")
    scratch: ScratchArray | None = Field(None, description="A zeroed array of its own.")
    value: bool | int | float | None = Field(None, description="A scalar or constant value.")

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        given = [self.array is not None, self.scratch is not None, self.value is not None]
        if sum(given) != 1:
            raise ValueError("a producer argument is exactly one of array, scratch, value")
        return self


class ProducerLaunch(_Strict):
    """A launch of another kernel of the spec's module that the operator's host code
    runs before this kernel on arrays the two share (counts, offsets, a workspace): the
    correctness harness runs it, as cuTile Python launches it, on the configuration's
    drawn arrays before either side runs, so both receive what the operator gives the
    kernel rather than random values its launch could not meet."""

    kernel: Name = Field(description="A @ct.kernel of the spec's module.")
    grid: list[Annotated[int, Field(ge=1)]] = Field(
        min_length=1, max_length=3, description="The recorded grid."
    )
    arguments: list[ProducerArgument] = Field(description="In the kernel's parameter order.")


# An input array's fixed values (`Config.values`): integers, or booleans for a bool array.
ArrayValues = list[int] | list[bool]
# The range of each integer dtype, for fixed values.
INTEGER_RANGES: Final[dict[str, tuple[int, int]]] = {
    **{f"int{bits}": (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) for bits in (8, 16, 32, 64)},
    **{f"uint{bits}": (0, 2**bits - 1) for bits in (8, 16, 32, 64)},
}


class Config(_Strict):
    """A concrete launch: the dimension sizes, dtypes and bindings of one call."""

    name: Name = Field(description="Unique among test and perf configurations.")
    dims: dict[str, int] = Field(
        default_factory=dict, description="Sizes of the dimension symbols used by shapes."
    )
    dtype: SpecDType = Field(
        description="The configuration's dtype: every array that allows it takes it, and "
        "the tolerances of this dtype apply."
    )
    array_dtypes: dict[str, SpecDType] = Field(
        default_factory=dict, description="Per-array dtype overrides."
    )
    constants: dict[str, ConstValue] = Field(
        default_factory=dict, description="Constant bindings (win over the variant's)."
    )
    scalars: dict[str, bool | int | float | Expr] = Field(
        default_factory=dict, description="Scalar argument values (or expressions)."
    )
    strides: dict[str, list[int]] = Field(
        default_factory=dict,
        description="Explicit strides in elements (e.g. a padded row pitch); overrides "
        "the array's layout for this configuration.",
    )
    storage_offsets: dict[str, int] = Field(
        default_factory=dict,
        description="Offset in elements of the array's first element from an aligned "
        "allocation (a sliced tensor); changes the base-address alignment.",
    )
    num_sms: int | None = Field(None, ge=1, description="Overrides num_sms (default 132).")
    producers: list[ProducerLaunch] = Field(
        default_factory=list,
        description="Launches of the operator's earlier kernels that make this "
        "configuration's inputs, run in order before each case.",
    )
    values: dict[str, ArrayValues] = Field(
        default_factory=dict,
        description="Fixed values of input arrays by name, row-major over the array's "
        "shape (as a launch recorded them): the correctness harness gives the reference "
        "and the port exactly these instead of drawing the array, for indices whose "
        "values mean something (a permutation, sorted unique ids, per-expert offsets). "
        "Integer (integers) and bool (booleans) arrays only, one value per element.",
    )
    description: str = Field("", description="Free text for readers.")


class Reference(_Strict):
    """What defines correct output, and where it came from."""

    oracle: Literal["function", "reference_kernel"] = Field(
        "function",
        description="function: a function (`function`) computes the expected outputs; "
        "reference_kernel: the reference kernel itself, launched on the same inputs, is the "
        "oracle (outputs bitwise equal where the port is SASS-identical, else within the "
        "tolerances).",
    )
    function: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$")] | (
        None
    ) = Field(
        None,
        description="`module:function`, the module resolved beside the spec file; required "
        "with oracle 'function'. It is called with the input arrays (torch tensors) and "
        "scalars as keyword arguments, plus the constants listed in pass_constants, and "
        "returns the output array or a dict of output arrays by parameter name.",
    )
    origin: str = Field(min_length=1, description="Where the definition came from.")
    pass_constants: list[str] = Field(
        default_factory=list, description="Constants the function also receives."
    )

    @model_validator(mode="after")
    def _function_when_needed(self) -> Self:
        if (self.oracle == "function") != (self.function is not None):
            raise ValueError("a function is given exactly when the oracle is 'function'")
        return self

    @property
    def function_module(self) -> str | None:
        """The module part of `function` (None for the reference-kernel oracle)."""
        return None if self.function is None else self.function.split(":", 1)[0]


class Tolerance(_Strict):
    """Allowed error for one dtype: |out - ref| <= atol + rtol * |ref|."""

    atol: float = Field(ge=0, description="Absolute tolerance.")
    rtol: float = Field(ge=0, description="Relative tolerance (times |reference|).")
    source: str = Field(min_length=1, description="Where the tolerance was taken from.")


class AutotuneConfig(_Strict):
    """One candidate the autotuner times."""

    constants: dict[str, ConstValue] = Field(
        default_factory=dict, description="Constant values of the candidate."
    )
    hints: Hints | None = Field(None, description="Compiler hints of the candidate.")


class Autotune(_Strict):
    """The autotuner's search: the configuration values it keys its cache on, and the
    candidate constants/hints it times."""

    key: list[str] = Field(min_length=1, description="Names of dims/dtype the cache keys on.")
    space: list[AutotuneConfig] = Field(min_length=1, description="The candidates.")


class EntrySymbol(_Strict):
    """How the exported entry is named and whether the IR diff compares the name."""

    naming: Literal["mangled", "fixed"] = Field(
        "mangled",
        description="mangled: cuTile's name mangling of the signature, as a launch names "
        "it; fixed: the symbol given here.",
    )
    symbol: Annotated[str, Field(pattern=IDENTIFIER)] | None = Field(
        None, description="The entry symbol when naming is 'fixed'."
    )
    compare: Literal["ignore", "exact"] = Field(
        "ignore", description="ignore: diffs compare IR modulo the entry symbol."
    )

    @model_validator(mode="after")
    def _symbol_when_fixed(self) -> Self:
        if (self.naming == "fixed") != (self.symbol is not None):
            raise ValueError("a symbol is given exactly when naming is 'fixed'")
        return self


class ResolvedArray(_Strict):
    """One array argument of a concrete configuration."""

    dtype: DTypeName
    shape: list[int]
    strides: list[int] = Field(description="In elements.")
    storage_offset: int = 0
    list_length: int | None = None
    role: Literal["in", "out", "inout"]


class ResolvedConfig(_Strict):
    """A configuration with every expression evaluated and its variant chosen."""

    name: str
    purpose: Literal["test", "perf"]
    variant: str
    dtype: DTypeName
    dims: dict[str, int]
    constants: dict[str, bool | int | float]
    scalars: dict[str, bool | int | float]
    scalar_dtypes: dict[str, Literal["int32", "float32", "bool"]]
    arrays: dict[str, ResolvedArray]
    grid: tuple[int, int, int]
    hints: Hints | None
    producers: list[ProducerLaunch] = Field(default_factory=list)
    values: dict[str, ArrayValues] = Field(
        default_factory=dict, description="Input arrays' fixed values, row-major."
    )

    def argument(self, name: str) -> bool | int | float:
        """What a launcher parameter `name` receives: a scalar's value, or a constant's
        where the caller passes it (the configurations bind it)."""
        return self.scalars[name] if name in self.scalars else self.constants[name]


class PortSpec(_Strict):
    """A kernel, its parameters and variants, and how it is tested and measured."""

    spec_version: Literal[1] = Field(description="Always 1.")
    name: Name = Field(description="The operator's name.")
    description: str = Field("", description="Free text for readers.")
    source: str = Field(
        min_length=1,
        description="Kernel source file, relative to the spec; derived from source_root "
        "and module when those are given.",
        json_schema_extra=SPEC_PATH,
    )
    source_root: str | None = Field(
        None,
        min_length=1,
        description="A directory on the library's Python path (TileGym's src/), absolute "
        "or relative to the spec; with `module`, the kernel is taken from the unmodified "
        "library.",
        json_schema_extra=SPEC_PATH,
    )
    module: Annotated[str, Field(pattern=MODULE_NAME)] | None = Field(
        None, description="The kernel's module by dotted name under source_root."
    )
    kernel: Name = Field(description="The @ct.kernel function in the source.")
    reference_backend: Literal["cutile_python", "triton_tileir"] = Field(
        description="The DSL the reference kernel is written in."
    )
    launch_path: Literal["direct", "autotuned"] = Field(
        description="direct: the host launches fixed variants; autotuned: through an "
        "autotuner (then `autotune` is required)."
    )
    arrays: dict[str, ArrayParam] = Field(
        min_length=1, description="Array parameters by kernel parameter name."
    )
    scalars: dict[str, ScalarParam] = Field(
        default_factory=dict, description="Runtime scalar parameters by name."
    )
    constants: dict[str, ConstantParam] = Field(
        default_factory=dict, description="ct.Constant parameters by name."
    )
    grid: list[IntOrExpr] = Field(
        min_length=1, max_length=3, description="Launch grid; missing dims are 1."
    )
    variants: list[Variant] = Field(
        min_length=1, description="Compiled forms, in dispatch order (first match wins)."
    )
    test_configs: list[Config] = Field(
        min_length=1, description="Correctness configurations (include ragged shapes)."
    )
    perf_configs: list[Config] = Field(
        default_factory=list, description="The fixed configuration set of the perf geomean."
    )
    reference: Reference = Field(description="The correctness reference.")
    tolerances: dict[SpecDType, Tolerance] = Field(
        min_length=1, description="Per-dtype tolerances; every configuration dtype needs one."
    )
    autotune: Autotune | None = Field(None, description="Required when launch_path is autotuned.")
    entry_symbol: EntrySymbol = Field(
        default_factory=lambda: EntrySymbol(), description="Entry naming and comparison."
    )
    targets: list[GpuTarget] = Field(
        default_factory=lambda: list(get_args(GpuTarget)),
        min_length=1,
        description="The GPUs the port is proven for: the reference is exported for the "
        "first, and the port's SASS is compared with the reference's on each. A kernel "
        "only one of them compiles (float8_e8m0fnu block scales: sm_100) names that one.",
    )

    @model_validator(mode="before")
    @classmethod
    def _source_from_module(cls, data: Any) -> Any:
        if not isinstance(data, dict) or ("module" not in data and "source_root" not in data):
            return data
        root, module = data.get("source_root"), data.get("module")
        if not isinstance(root, str) or not isinstance(module, str):
            raise ValueError("source_root and module are given together")
        if not re.match(MODULE_NAME, module):
            return data  # the field's own check reports it
        derived = f"{root.rstrip('/')}/{module.replace('.', '/')}.py"
        if data.get("source", derived) != derived:
            raise ValueError(f"source {data['source']!r} is not module {module!r} under {root!r}")
        return {**data, "source": derived}

    @model_validator(mode="after")
    def _coherent(self) -> Self:
        self._check_names()
        self._check_references()
        resolved = [self.resolve(c, "test") for c in self.test_configs]
        for perf in self.perf_configs:
            self.resolve(perf, "perf")
        for variant in self.variants:
            if not any(r.variant == variant.name for r in resolved):
                raise ValueError(f"no test configuration dispatches to variant {variant.name!r}")
            if variant.representative is not None:
                rep = next((r for r in resolved if r.name == variant.representative), None)
                if rep is None or rep.variant != variant.name:
                    raise ValueError(
                        f"variant {variant.name!r}: representative {variant.representative!r} "
                        "is not a test configuration that dispatches to it"
                    )
        missing = {c.dtype for c in [*self.test_configs, *self.perf_configs]} - set(self.tolerances)
        if missing:
            raise ValueError(f"no tolerance for dtype(s) {sorted(missing)}")
        if self.launch_path == "autotuned" and self.autotune is None:
            raise ValueError("launch_path 'autotuned' needs an autotune section")
        return self

    def _check_names(self) -> None:
        seen: dict[str, str] = {}
        for kind, names in (
            ("array", self.arrays),
            ("scalar", self.scalars),
            ("constant", self.constants),
        ):
            for name in names:
                if not re.match(IDENTIFIER, name):
                    raise ValueError(f"{kind} name {name!r} is not an identifier")
                if name in seen:
                    raise ValueError(f"{name!r} is declared as both {seen[name]} and {kind}")
                seen[name] = kind
        for label, items in (
            ("variant", [v.name for v in self.variants]),
            ("configuration", [c.name for c in [*self.test_configs, *self.perf_configs]]),
            ("target", [str(target) for target in self.targets]),
        ):
            dupes = sorted({n for n in items if items.count(n) > 1})
            if dupes:
                raise ValueError(f"{label} name(s) used twice: {dupes}")

    def _check_references(self) -> None:
        for name in self.reference.pass_constants:
            if name not in self.constants:
                raise ValueError(f"reference.pass_constants names unknown constant {name!r}")
        for variant in self.variants:
            self._check_known(variant.constants, self.constants, f"variant {variant.name!r}")
        for index, candidate in enumerate(self.autotune.space if self.autotune else []):
            self._check_known(candidate.constants, self.constants, f"autotune.space[{index}]")
        for config in [*self.test_configs, *self.perf_configs]:
            where = f"configuration {config.name!r}"
            self._check_known(config.constants, self.constants, where)
            self._check_known(config.scalars, self.scalars, where)
            self._check_known(config.array_dtypes, self.arrays, where)
            self._check_known(config.strides, self.arrays, where)
            self._check_known(config.storage_offsets, self.arrays, where)
            self._check_known(config.values, self.arrays, where)
            for name in config.values:
                valued = self.arrays[name]
                if valued.role == "out" or valued.list_length is not None:
                    raise ValueError(
                        f"{where}: values are given for {name!r}, which is not an input "
                        "array (an output, or a list of arrays)"
                    )
            for producer in config.producers:
                for argument in producer.arguments:
                    array = self.arrays.get(argument.array or "")
                    if argument.array is not None and array is None:
                        raise ValueError(
                            f"{where}: producer {producer.kernel} names unknown array "
                            f"{argument.array!r}"
                        )
                    if array is not None and (array.role == "out" or array.list_length):
                        raise ValueError(
                            f"{where}: producer {producer.kernel} writes {argument.array!r}, "
                            "which is not an input array of the kernel"
                        )

    @staticmethod
    def _check_known(given: dict[str, Any], declared: dict[str, Any], where: str) -> None:
        unknown = sorted(set(given) - set(declared))
        if unknown:
            raise ValueError(f"{where} binds undeclared name(s) {unknown}")

    # -- resolution of a configuration ---------------------------------------------

    def all_configs(self) -> list[tuple[Config, Literal["test", "perf"]]]:
        tests: list[tuple[Config, Literal["test", "perf"]]] = [
            (c, "test") for c in self.test_configs
        ]
        return tests + [(c, "perf") for c in self.perf_configs]

    def dispatch(self, config: Config) -> Variant:
        """The variant a launch with this configuration runs: the first whose condition holds."""
        env = self._base_env(config)
        env.update({k: v for k, v in config.constants.items() if not isinstance(v, str)})
        for variant in self.variants:
            if evaluate(variant.when, env):
                return variant
        raise ValueError(f"configuration {config.name!r}: no variant's condition holds")

    def resolve(self, config: Config, purpose: Literal["test", "perf"]) -> ResolvedConfig:
        """Evaluate every expression for one configuration (raises ValueError naming it)."""
        try:
            return self._resolve(config, purpose)
        except ExprError as exc:
            raise ValueError(f"configuration {config.name!r}: {exc}") from None

    def representative(self, variant: Variant) -> ResolvedConfig:
        """The test configuration whose facts the variant's reference export uses."""
        for config in self.test_configs:
            resolved = self.resolve(config, "test")
            wanted = variant.representative in (None, config.name)
            if resolved.variant == variant.name and wanted:
                return resolved
        raise ValueError(f"no test configuration dispatches to variant {variant.name!r}")

    def _base_env(self, config: Config) -> dict[str, Value]:
        env: dict[str, Value] = dict(config.dims)
        env["dtype"] = config.dtype
        env["num_sms"] = config.num_sms or DEFAULT_NUM_SMS
        return env

    def _resolve(self, config: Config, purpose: Literal["test", "perf"]) -> ResolvedConfig:
        variant = self.dispatch(config)
        env = self._base_env(config)
        constants = self._resolve_constants(config, variant, env)
        scalars = self._resolve_scalars(config, env)
        arrays = {
            name: self._resolve_array(name, param, config, env)
            for name, param in self.arrays.items()
        }
        grid_exprs = variant.grid or self.grid
        grid = [evaluate_int(g, env) for g in grid_exprs] + [1] * (3 - len(grid_exprs))
        if any(g < 1 for g in grid):
            raise ExprError(f"launch grid {grid} has a dimension below 1")
        return ResolvedConfig(
            name=config.name,
            purpose=purpose,
            variant=variant.name,
            dtype=config.dtype,
            dims=dict(config.dims),
            constants=constants,
            scalars=scalars,
            scalar_dtypes={name: p.dtype for name, p in self.scalars.items()},
            arrays=arrays,
            grid=(grid[0], grid[1], grid[2]),
            hints=variant.hints,
            producers=list(config.producers),
            values={
                name: _fixed_values(name, arrays[name], given)
                for name, given in config.values.items()
            },
        )

    def _resolve_constants(
        self, config: Config, variant: Variant, env: dict[str, Value]
    ) -> dict[str, bool | int | float]:
        constants: dict[str, bool | int | float] = {}
        for name, param in self.constants.items():
            raw = _first_bound(
                config.constants.get(name), variant.constants.get(name), param.default
            )
            if raw is None:
                raise ExprError(
                    f"constant {name!r} is bound by neither configuration, "
                    f"variant {variant.name!r} nor a default"
                )
            value = evaluate(raw, env) if isinstance(raw, str) else raw
            constants[name] = _as_constant(name, param.type, value)
            env[name] = constants[name]
        return constants

    def _resolve_scalars(
        self, config: Config, env: dict[str, Value]
    ) -> dict[str, bool | int | float]:
        scalars: dict[str, bool | int | float] = {}
        for name, param in self.scalars.items():
            raw = config.scalars.get(name, param.default)
            if raw is None:
                raise ExprError(f"scalar {name!r} has no value in the configuration or default")
            value = evaluate(raw, env) if isinstance(raw, str) else raw
            scalars[name] = _as_scalar(name, param.dtype, value)
            env[name] = scalars[name]
        return scalars

    def _resolve_array(
        self, name: str, param: ArrayParam, config: Config, env: dict[str, Value]
    ) -> ResolvedArray:
        shape = [evaluate_int(d, env) for d in param.shape]
        if any(d < 0 for d in shape):
            raise ExprError(f"array {name!r} has a negative extent in shape {shape}")
        strides = config.strides.get(name) or _layout_strides(shape, param.memory_order)
        if len(strides) != param.rank:
            raise ExprError(f"array {name!r}: {len(strides)} strides for rank {param.rank}")
        dtype = _array_dtype(name, param, config)
        length = None if param.list_length is None else evaluate_int(param.list_length, env)
        return ResolvedArray(
            dtype=dtype,
            shape=shape,
            strides=strides,
            storage_offset=config.storage_offsets.get(name, 0),
            list_length=length,
            role=param.role,
        )


def _first_bound(*candidates: ConstValue | None) -> ConstValue | None:
    return next((c for c in candidates if c is not None), None)


def _as_scalar(name: str, dtype: str, value: Value) -> bool | int | float:
    if dtype == "bool" and isinstance(value, bool):
        return value
    if dtype == "int32" and isinstance(value, int) and not isinstance(value, bool):
        if not -(2**31) <= value < 2**31:
            raise ExprError(f"scalar {name!r} = {value} does not fit int32")
        return value
    if dtype == "float32" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise ExprError(f"scalar {name!r} is declared {dtype} but got {value!r}")


def _as_constant(name: str, kind: str, value: Value) -> bool | int | float:
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "float" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise ExprError(f"constant {name!r} is declared {kind} but got {value!r}")


def _fixed_values(name: str, array: ResolvedArray, values: ArrayValues) -> ArrayValues:
    """`values` checked against the array they fill: one per element, each of its dtype."""
    count = math.prod(array.shape)
    if len(values) != count:
        raise ExprError(
            f"array {name!r}: {len(values)} values for shape {array.shape} ({count} elements)"
        )
    if array.dtype == "bool":
        if not all(isinstance(value, bool) for value in values):
            raise ExprError(f"array {name!r} is bool: its values are true or false")
        return values
    bounds = INTEGER_RANGES.get(array.dtype)
    if bounds is None:
        raise ExprError(
            f"array {name!r} is {array.dtype}: values are given for integer and bool arrays"
        )
    low, high = bounds
    wrong = [v for v in values if isinstance(v, bool) or not low <= v <= high]
    if wrong:
        raise ExprError(f"array {name!r}: {wrong[0]!r} is not a value of {array.dtype}")
    return values


def _layout_strides(shape: list[int], memory_order: list[int] | None) -> list[int]:
    """Strides (in elements) of a dense buffer laid out in `memory_order`
    (outermost first); row-major when no order is given."""
    order = memory_order if memory_order is not None else list(range(len(shape)))
    strides = [0] * len(shape)
    step = 1
    for dim in reversed(order):
        strides[dim] = step
        step *= max(shape[dim], 1)
    return strides


def _array_dtype(name: str, param: ArrayParam, config: Config) -> DTypeName:
    if name in config.array_dtypes:
        chosen = config.array_dtypes[name]
    elif config.dtype in param.dtypes:
        chosen = config.dtype
    elif len(param.dtypes) == 1:
        chosen = param.dtypes[0]
    else:
        raise ExprError(
            f"array {name!r} allows {param.dtypes}, not the configuration's {config.dtype}; "
            "give it in array_dtypes"
        )
    if chosen not in param.dtypes:
        raise ExprError(f"array {name!r} does not allow dtype {chosen} (allows {param.dtypes})")
    return chosen


# -- loading ------------------------------------------------------------------------


class PortSpecError(ValueError):
    """A port spec that cannot be read or is invalid; says which file and field."""

    def __init__(self, path: Path, problems: list[tuple[str, str]]) -> None:
        self.path = path
        self.problems = problems
        lines = [f"{path}: {field}: {message}" for field, message in problems]
        super().__init__("invalid port spec\n" + "\n".join(lines))


class _SpecLoader(yaml.SafeLoader):
    """YAML 1.1 reads `1e-5` as a string; port specs want it as a float, and a key
    written twice is an error rather than a silent overwrite."""


_SpecLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)$|^[-+]?(?:\d+\.\d*|\.\d+)$"),
    list("-+0123456789."),
)


def _mapping_without_duplicates(loader: yaml.SafeLoader, node: yaml.MappingNode) -> Any:
    keys: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in keys:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} appears twice", key_node.start_mark
            )
        keys.add(key)
    return loader.construct_mapping(node)


_SpecLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates
)


_UNION_BRANCH = re.compile(r"^(int|float|bool|str|none|list\[.*\]|dict\[.*\]|.*\[.*\])$")


def _field_path(loc: tuple[int | str, ...]) -> str:
    """`arrays.x.shape[0]` from pydantic's location, without its union-branch tags."""
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif _UNION_BRANCH.match(item):
            continue
        elif parts:
            parts.append(f".{item}")
        else:
            parts.append(item)
    return "".join(parts) or "(top level)"


def parse_port_spec(data: object, path: Path) -> PortSpec:
    """Validate already-loaded YAML/JSON data; errors name `path` and the field."""
    try:
        return PortSpec.model_validate(data)
    except ValidationError as exc:
        by_field: dict[str, list[str]] = {}
        for err in exc.errors():
            message = err["msg"].removeprefix("Value error, ")
            messages = by_field.setdefault(_field_path(err["loc"]), [])
            if message not in messages:
                messages.append(message)
        problems = [(field, " / ".join(msgs)) for field, msgs in by_field.items()]
        raise PortSpecError(path, problems) from None


def load_port_spec(path: Path) -> PortSpec:
    """Read and validate a `<name>.port.yaml` file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PortSpecError(path, [("(file)", exc.strerror or str(exc))]) from None
    try:
        data = yaml.load(text, Loader=_SpecLoader)  # a SafeLoader subclass
    except RecursionError:
        # Nesting deeper than the interpreter's stack (`a: [[[[...]]]]`): no spec.
        raise PortSpecError(path, [("(yaml)", "nested too deeply")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "(yaml)"
        problem = getattr(exc, "problem", None) or str(exc)
        raise PortSpecError(path, [(where, str(problem))]) from None
    return parse_port_spec(data, path)


def with_source_root(spec_text: bytes, root: str) -> bytes:
    """The spec's text with its `source_root` replaced (comments and layout kept): a
    copy of a library spec that reads its modules from elsewhere (a run, a bundle)."""
    text = spec_text.decode("utf-8")
    changed, count = re.subn(r"(?m)^source_root:.*$", f"source_root: {root}", text)
    if count != 1:
        data = yaml.safe_load(text)
        data["source_root"] = root
        changed = yaml.safe_dump(data, sort_keys=False)
    return changed.encode("utf-8")


def spec_relative(spec_path: Path, relative: str) -> Path:
    """A path the spec gives (source file, reference module) resolved beside it."""
    return (spec_path.parent / relative).resolve()


def kernel_parameter_order(spec: PortSpec, spec_path: Path) -> list[str]:
    """The `@ct.kernel` function's parameter names, in order; each one the spec declares."""
    source = spec_relative(spec_path, spec.source)
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    except (OSError, SyntaxError) as exc:
        raise PortSpecError(
            spec_path, [("source", f"cannot read the reference kernel {source}: {exc}")]
        ) from None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == spec.kernel:
            names = [arg.arg for arg in node.args.posonlyargs + node.args.args]
            declared = set(spec.arrays) | set(spec.scalars) | set(spec.constants)
            unknown = [name for name in names if name not in declared]
            if unknown:
                raise PortSpecError(
                    spec_path,
                    [("kernel", f"kernel parameters {unknown} are not declared in the spec")],
                )
            return names
    raise PortSpecError(
        spec_path, [("kernel", f"{source.name} defines no function {spec.kernel!r}")]
    )


def json_schema() -> dict[str, Any]:
    schema = PortSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://tileport.dev/schemas/port-spec.schema.json"
    return schema


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


SPEC_SUFFIXES = (".port.yaml", ".port.yml", ".yaml", ".yml")


def operator_name(spec_path: Path) -> str:
    """`softmax.port.yaml` -> `softmax`."""
    name = spec_path.name
    for suffix in SPEC_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return spec_path.stem


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m schemas.port_spec", description=__doc__)
    parser.add_argument("--json-schema", action="store_true", help="print the JSON Schema")
    parser.add_argument("--check", nargs="*", type=Path, default=[], help="validate spec files")
    args = parser.parse_args(argv)
    if args.json_schema:
        sys.stdout.write(json_schema_text())
    status = 0
    for path in args.check:
        try:
            load_port_spec(path)
            print(f"{path}: ok")
        except PortSpecError as exc:
            print(exc, file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
