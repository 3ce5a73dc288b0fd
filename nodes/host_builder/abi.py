"""The C ABI of the aggregated kernel library, defined once.

Everything that crosses the C boundary is declared here: the tensor
descriptor, the launch plan, the status codes, the dtype codes and the
library-level functions. Two texts are generated from this one definition:

- the cffi `cdef` (C declarations), the single source of truth for the
  signatures the Python side calls;
- `kernels_rs/ported/src/ffi/abi.rs`, the Rust mirror of the same structs and
  codes, with `tileport_abi_query`, which reports the compiled struct layout so
  a test can compare it with what cffi computes from the cdef.

Per-operator declarations (`cutile_<op>` and `cutile_<op>_plan`) come from
`OperatorAbi` values; `library_cdef` puts everything together, and its
fingerprint is compiled into the library so a wrapper refuses a stale build.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from schemas.port_spec import ITEMSIZE

ABI_VERSION: Final = 1
MAX_RANK: Final = 8
MAX_GENERICS: Final = 32
TENSOR_TYPE: Final = "tileport_tensor_t"
PLAN_TYPE: Final = "tileport_plan_t"


class Status(IntEnum):
    """What every exported function returns: 0 or one distinct negative code."""

    OK = 0
    NULL_DESCRIPTOR = -1
    UNKNOWN_DTYPE = -2
    UNSUPPORTED_DTYPE = -3
    BAD_RANK = -4
    BAD_SHAPE = -5
    BAD_STRIDE = -6
    MISALIGNED = -7
    DEVICE = -8
    LAUNCH = -9
    PANIC = -10


STATUS_MEANING: Final[dict[Status, str]] = {
    Status.OK: "launched (or nothing to do: an empty grid)",
    Status.NULL_DESCRIPTOR: "a descriptor pointer (a list's element array or table, or the "
    "plan pointer) is null",
    Status.UNKNOWN_DTYPE: "a descriptor's dtype code is not in the ABI's dtype table",
    Status.UNSUPPORTED_DTYPE: "the dtype is valid but the port has no entry for it, "
    "arrays that share an element type disagree, or a list's table is not int64",
    Status.BAD_RANK: "a descriptor's ndim differs from the parameter's rank (or exceeds MAX_RANK)",
    Status.BAD_SHAPE: "a negative extent, an extent above i32, arrays that disagree on a "
    "dimension, an empty list, a list table of the wrong shape, or a derived constant/grid "
    "out of range",
    Status.BAD_STRIDE: "a negative stride, a stride above i32, or a non-unit innermost stride",
    Status.MISALIGNED: "a base address or stride breaks a divisibility the port assumes",
    Status.DEVICE: "no CUDA driver, a data pointer that is not device memory, tensors on "
    "different devices, or a stream of another device",
    Status.LAUNCH: "JIT compilation or the kernel launch failed",
    Status.PANIC: "a Rust panic was caught at the boundary",
}


class DType(IntEnum):
    """Element type codes. 0 is never valid, so a zeroed descriptor is refused."""

    BOOL = 1
    INT8 = 2
    INT16 = 3
    INT32 = 4
    INT64 = 5
    UINT8 = 6
    UINT16 = 7
    UINT32 = 8
    UINT64 = 9
    FLOAT16 = 10
    BFLOAT16 = 11
    FLOAT32 = 12
    FLOAT64 = 13
    TFLOAT32 = 14
    FLOAT8_E4M3FN = 15
    FLOAT8_E5M2 = 16
    FLOAT8_E8M0FNU = 17

    @property
    def spec_name(self) -> str:
        """The name port specs and torch use (`float16`, `bfloat16`, ...)."""
        return self.name.lower()

    @classmethod
    def from_spec_name(cls, name: str) -> DType:
        return cls[name.upper()]


RUST_ELEMENT_TYPES: Final[dict[DType, str]] = {
    DType.BOOL: "bool",
    DType.INT8: "i8",
    DType.INT16: "i16",
    DType.INT32: "i32",
    DType.INT64: "i64",
    DType.UINT8: "u8",
    DType.UINT16: "u16",
    DType.UINT32: "u32",
    DType.UINT64: "u64",
    DType.FLOAT16: "f16",
    DType.BFLOAT16: "bf16",
    DType.FLOAT32: "f32",
    DType.FLOAT64: "f64",
    DType.FLOAT8_E4M3FN: "f8e4m3fn",
    DType.FLOAT8_E5M2: "f8e5m2",
    DType.FLOAT8_E8M0FNU: "f8e8m0fnu",
}
"""The cutile element type (as a generic argument string) of each dtype that has one."""

RUST_TYPE_PATHS: Final[dict[str, str]] = {
    "f16": "cutile::half::f16",
    "bf16": "cutile::half::bf16",
    "f8e4m3fn": "cutile::cuda_core::f8e4m3fn",
    "f8e5m2": "cutile::cuda_core::f8e5m2",
    "f8e8m0fnu": "cutile::cuda_core::f8e8m0fnu",
}
"""Rust paths of element types that are not primitives."""

SCALAR_C_TYPES: Final[dict[DType, tuple[str, str]]] = {
    DType.BOOL: ("bool", "bool"),
    DType.INT8: ("int8_t", "i8"),
    DType.INT16: ("int16_t", "i16"),
    DType.INT32: ("int32_t", "i32"),
    DType.INT64: ("int64_t", "i64"),
    DType.UINT8: ("uint8_t", "u8"),
    DType.UINT16: ("uint16_t", "u16"),
    DType.UINT32: ("uint32_t", "u32"),
    DType.UINT64: ("uint64_t", "u64"),
    DType.FLOAT32: ("float", "f32"),
    DType.FLOAT64: ("double", "f64"),
}
"""(C type, Rust type) of a runtime scalar argument, by its dtype."""


@dataclass(frozen=True)
class Field:
    """One struct field: C and Rust scalar types, and an array length when > 1."""

    name: str
    c_type: str
    rust_type: str
    count: int = 1

    def c_decl(self) -> str:
        suffix = f"[{self.count}]" if self.count > 1 else ""
        return f"{self.c_type} {self.name}{suffix};"

    def rust_decl(self) -> str:
        rust = f"[{self.rust_type}; {self.count}]" if self.count > 1 else self.rust_type
        return f"pub {self.name}: {rust},"


@dataclass(frozen=True)
class Struct:
    c_name: str
    rust_name: str
    doc: str
    fields: tuple[Field, ...]


TENSOR_STRUCT: Final = Struct(
    c_name=TENSOR_TYPE,
    rust_name="Tensor",
    doc="A borrowed tensor: device address, dtype code, rank, extents and strides "
    "(in elements). Entries past ndim are ignored.",
    fields=(
        Field("data", "uint64_t", "u64"),
        Field("dtype", "int32_t", "i32"),
        Field("ndim", "int32_t", "i32"),
        Field("shape", "int64_t", "i64", MAX_RANK),
        Field("strides", "int64_t", "i64", MAX_RANK),
    ),
)

PLAN_STRUCT: Final = Struct(
    c_name=PLAN_TYPE,
    rust_name="Plan",
    doc="What a launch would do, computed from the descriptors without any CUDA call: "
    "the variant, the grid and the generic arguments (integers; dtype codes for "
    "element-type generics).",
    fields=(
        Field("variant", "int32_t", "i32"),
        Field("num_generics", "int32_t", "i32"),
        Field("grid", "uint32_t", "u32", 3),
        Field("reserved", "int32_t", "i32"),
        Field("generics", "int64_t", "i64", MAX_GENERICS),
    ),
)

STRUCTS: Final = (TENSOR_STRUCT, PLAN_STRUCT)


class QueryKey(IntEnum):
    """Keys of `tileport_abi_query`; field offsets are FIELD_OFFSET_BASE[struct] + index."""

    VERSION = 0
    MAX_RANK = 1
    MAX_GENERICS = 2
    TENSOR_SIZE = 3
    TENSOR_ALIGN = 4
    PLAN_SIZE = 5
    PLAN_ALIGN = 6


FIELD_OFFSET_BASE: Final[dict[str, int]] = {TENSOR_TYPE: 100, PLAN_TYPE: 200}

LIBRARY_FUNCTIONS: Final = (
    "uint32_t tileport_abi_version(void);",
    "uint64_t tileport_abi_fingerprint(void);",
    "int64_t tileport_abi_query(int32_t key);",
    "const char *tileport_cdef(void);",
    "size_t tileport_last_error(char *buffer, size_t capacity);",
    "int32_t tileport_selftest_panic(void);",
    "int32_t tileport_enable_disk_cache(void);",
    "int32_t tileport_table_owned(uint64_t address);",
    "int32_t tileport_table_released(uint64_t address);",
)


@dataclass(frozen=True)
class ScalarArg:
    """A scalar C parameter: a kernel scalar, or (`constant`) a constant the caller
    passes because the configurations bind it (the launcher reads it, the kernel
    receives it as a generic or not at all)."""

    name: str
    dtype: DType
    constant: bool = False

    @property
    def c_type(self) -> str:
        return SCALAR_C_TYPES[self.dtype][0]

    @property
    def rust_type(self) -> str:
        return SCALAR_C_TYPES[self.dtype][1]


def list_params(name: str) -> tuple[str, str, str]:
    """The C parameters of list parameter `name`: its element descriptors, their
    number and the descriptor of its device table."""
    return name, f"{name}_len", f"{name}_table"


@dataclass(frozen=True)
class OperatorAbi:
    """The C signature of one operator: its arrays (descriptors; a list of arrays
    takes three parameters, see `list_params`) and scalars, in the kernel's
    parameter order."""

    name: str
    arrays: tuple[str, ...]
    scalars: tuple[ScalarArg, ...] = ()
    lists: frozenset[str] = frozenset()

    @property
    def symbol(self) -> str:
        return f"cutile_{self.name}"

    @property
    def plan_symbol(self) -> str:
        return f"cutile_{self.name}_plan"

    def _params(self) -> list[str]:
        params: list[str] = []
        for array in self.arrays:
            if array in self.lists:
                elements, length, table = list_params(array)
                params += [
                    f"const {TENSOR_TYPE} *{elements}",
                    f"int32_t {length}",
                    f"const {TENSOR_TYPE} *{table}",
                ]
            else:
                params.append(f"const {TENSOR_TYPE} *{array}")
        return params + [f"{scalar.c_type} {scalar.name}" for scalar in self.scalars]

    def c_declarations(self) -> list[str]:
        params = self._params()
        return [
            _c_function(self.symbol, [*params, "void *stream"]),
            _c_function(self.plan_symbol, [*params, "int32_t num_sms", f"{PLAN_TYPE} *plan"]),
        ]


def _c_function(name: str, params: list[str]) -> str:
    """One declaration, one parameter per line when it would not fit 100 columns."""
    single = f"int32_t {name}({', '.join(params)});"
    if len(single) <= 100:
        return single
    return f"int32_t {name}(\n" + ",\n".join(f"    {p}" for p in params) + "\n);"


def _enum_cdef(name: str, prefix: str, members: list[tuple[str, int]]) -> str:
    body = ",\n".join(f"    {prefix}{member} = {value}" for member, value in members)
    return f"enum {name} {{\n{body}\n}};"


def _struct_cdef(struct: Struct) -> str:
    fields = "\n".join(f"    {field.c_decl()}" for field in struct.fields)
    return f"typedef struct {{\n{fields}\n}} {struct.c_name};"


def core_cdef() -> str:
    """The declarations every library has, whatever operators it holds."""
    parts = [
        f"/* tileport C ABI version {ABI_VERSION}: generated from nodes/host_builder/abi.py */",
        _enum_cdef("tileport_status", "TILEPORT_", [(s.name, s.value) for s in Status]),
        _enum_cdef("tileport_dtype", "TILEPORT_DTYPE_", [(d.name, d.value) for d in DType]),
        *(_struct_cdef(struct) for struct in STRUCTS),
        *LIBRARY_FUNCTIONS,
    ]
    return "\n".join(parts) + "\n"


def library_cdef(operators: list[OperatorAbi]) -> str:
    """The whole library's cdef: the core plus each operator, in name order."""
    lines = [core_cdef()]
    for operator in sorted(operators, key=lambda op: op.name):
        lines.extend(operator.c_declarations())
    return "\n".join(lines) + "\n"


def fingerprint(cdef: str) -> int:
    """A 64-bit digest of a cdef; the library compiles it in, the wrapper compares it."""
    return int.from_bytes(hashlib.sha256(cdef.encode()).digest()[:8], "big")


# --- the Rust mirror ------------------------------------------------------------------


def _rust_struct(struct: Struct) -> str:
    fields = "\n".join(f"    {field.rust_decl()}" for field in struct.fields)
    return (
        f"/// {struct.doc}\n"
        "#[repr(C)]\n"
        "#[derive(Debug, Clone, Copy)]\n"
        f"pub struct {struct.rust_name} {{\n{fields}\n}}\n"
    )


def _rust_enum(name: str, doc: str, members: list[tuple[str, int]], repr_type: str) -> str:
    variants = "\n".join(f"    {camel(member)} = {value}," for member, value in members)
    return (
        f"/// {doc}\n"
        f"#[repr({repr_type})]\n"
        "#[derive(Debug, Clone, Copy, PartialEq, Eq)]\n"
        f"pub enum {name} {{\n{variants}\n}}\n"
    )


def camel(name: str) -> str:
    """`FLOAT16` → `Float16`: the Rust enum variant of an ABI name."""
    return "".join(part.capitalize() for part in name.split("_"))


def _dtype_impl() -> str:
    from_code = "\n".join(f"            {d.value} => Some(Dtype::{camel(d.name)})," for d in DType)
    names = "\n".join(f'            Dtype::{camel(d.name)} => "{d.spec_name}",' for d in DType)
    rust_names = "\n".join(
        f'            Dtype::{camel(d.name)} => Some("{RUST_ELEMENT_TYPES[d]}"),'
        for d in DType
        if d in RUST_ELEMENT_TYPES
    )
    itemsizes = "\n".join(
        f"            Dtype::{camel(d.name)} => {ITEMSIZE[d.spec_name]}," for d in DType
    )
    return (
        "impl Dtype {\n"
        "    /// The dtype of an ABI code, if the code is in the table.\n"
        "    pub fn from_code(code: i32) -> Option<Dtype> {\n"
        "        match code {\n"
        f"{from_code}\n"
        "            _ => None,\n"
        "        }\n"
        "    }\n\n"
        "    /// The name port specs and torch use.\n"
        "    pub fn name(self) -> &'static str {\n"
        "        match self {\n"
        f"{names}\n"
        "        }\n"
        "    }\n\n"
        "    /// Bytes per element.\n"
        "    pub fn itemsize(self) -> i64 {\n"
        "        match self {\n"
        f"{itemsizes}\n"
        "        }\n"
        "    }\n\n"
        "    /// The cutile element type, as a generic argument string.\n"
        "    pub fn rust_element(self) -> Option<&'static str> {\n"
        "        match self {\n"
        f"{rust_names}\n"
        "            _ => None,\n"
        "        }\n"
        "    }\n"
        "}\n"
    )


def _query_fn() -> str:
    arms = [
        f"        {QueryKey.VERSION.value} => i64::from(ABI_VERSION),",
        f"        {QueryKey.MAX_RANK.value} => MAX_RANK as i64,",
        f"        {QueryKey.MAX_GENERICS.value} => MAX_GENERICS as i64,",
        f"        {QueryKey.TENSOR_SIZE.value} => size_of::<Tensor>() as i64,",
        f"        {QueryKey.TENSOR_ALIGN.value} => align_of::<Tensor>() as i64,",
        f"        {QueryKey.PLAN_SIZE.value} => size_of::<Plan>() as i64,",
        f"        {QueryKey.PLAN_ALIGN.value} => align_of::<Plan>() as i64,",
    ]
    for struct in STRUCTS:
        base = FIELD_OFFSET_BASE[struct.c_name]
        arms += [
            f"        {base + index} => offset_of!({struct.rust_name}, {field.name}) as i64,"
            for index, field in enumerate(struct.fields)
        ]
    return (
        "/// The compiled layout, for the layout test: keys are `QueryKey` in abi.py;\n"
        "/// field offsets are 100 + index (tensor) and 200 + index (plan); -1 if unknown.\n"
        "#[no_mangle]\n"
        'pub extern "C" fn tileport_abi_query(key: i32) -> i64 {\n'
        "    match key {\n" + "\n".join(arms) + "\n        _ => -1,\n    }\n}\n"
    )


def rust_abi_module() -> str:
    """The text of `ffi/abi.rs`."""
    statuses = [(s.name, s.value) for s in Status]
    dtypes = [(d.name, d.value) for d in DType]
    return "\n".join(
        [
            "//! @generated by nodes/host_builder/abi.py: the Rust mirror of the C ABI.",
            "//! Do not edit.",
            "",
            "use std::mem::{align_of, offset_of, size_of};",
            "",
            f"pub const ABI_VERSION: u32 = {ABI_VERSION};",
            f"pub const MAX_RANK: usize = {MAX_RANK};",
            f"pub const MAX_GENERICS: usize = {MAX_GENERICS};",
            "",
            _rust_struct(TENSOR_STRUCT),
            _rust_struct(PLAN_STRUCT),
            _rust_enum("Status", "Status codes; each failure has its own.", statuses, "i32"),
            _rust_enum("Dtype", "Element type codes of the descriptor.", dtypes, "i32"),
            _dtype_impl(),
            "/// The ABI version this library implements.",
            "#[no_mangle]",
            'pub extern "C" fn tileport_abi_version() -> u32 {',
            "    ABI_VERSION",
            "}",
            "",
            _query_fn(),
        ]
    )
