"""Requests, records and errors of the reference (cuTile Python) Tile IR export.

A specialisation states, per kernel parameter, exactly what a cuTile launch
would know about the argument (`ArrayConstraint` facts for arrays, the dtype
of scalars, the value of constants). The export writes, per variant,
`<variant>.bytecode`, `<variant>.mlir`, `<variant>.loc.mlir` and one
`<variant>.<target>.cubin` per target, and describes them in `export.json`
(an `ExportRecord`). Problems in the user's kernel come back as an
`ExportError`, never as a traceback.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.port_spec import DTypeName, EntrySymbol, Hints


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ArrayFacts(_Strict):
    """The facts of one array argument, as `cuda.tile.compilation.ArrayConstraint` takes
    them. Shape and stride divisibility are in elements, the base address's in bytes."""

    dtype: DTypeName
    ndim: int = Field(ge=0)
    index_dtype: Literal["int32", "int64"] = "int32"
    shape_divisible_by: list[int]
    stride_divisible_by: list[int]
    stride_constant: list[int | None]
    shape_constant: list[int | None] | None = Field(
        None,
        description="Extents known at compile time (a launch makes every extent of 1 "
        "one); needs cuTile's calling convention v2.",
    )
    stride_lower_bound_incl: int | None = 0
    base_addr_divisible_by: int = Field(ge=1)
    alias_groups: list[str] = Field(default_factory=list)
    may_alias_internally: bool = False
    example_shape: list[int] | None = Field(
        None, description="The concrete shape the facts were derived from."
    )
    example_strides: list[int] | None = Field(
        None, description="The concrete strides (elements) the facts were derived from."
    )


class ArrayArg(_Strict):
    kind: Literal["array"] = "array"
    facts: ArrayFacts


class ArrayListArg(_Strict):
    """A list of arrays (`ListConstraint`): every element satisfies `element`. A launch
    does not check the elements against each other, so they may alias."""

    kind: Literal["array_list"] = "array_list"
    element: ArrayFacts
    elements_may_alias: bool = True
    example_length: int | None = None


class ScalarArg(_Strict):
    kind: Literal["scalar"] = "scalar"
    dtype: Literal["int32", "float32", "bool"]


class ConstantArg(_Strict):
    kind: Literal["constant"] = "constant"
    value: bool | int | float


ParamArg = Annotated[ArrayArg | ArrayListArg | ScalarArg | ConstantArg, Field(discriminator="kind")]


class Specialisation(_Strict):
    """One compiled variant: every kernel parameter's facts, by parameter name."""

    variant: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    params: dict[str, ParamArg]
    demangle: str | None = Field(
        None,
        description="A recorded entry symbol: the signature is rebuilt from it "
        "(`cuda.tile.compilation.demangle_kernel_name`) instead of from `params`.",
    )
    hints: Hints | None = None
    config: str | None = Field(None, description="The configuration the facts came from.")
    grid: tuple[int, int, int] | None = None


class ExportRequest(_Strict):
    """What the sandboxed export process is asked to do."""

    source: str = Field(description="Absolute path of the kernel source file.")
    source_root: str | None = Field(
        None, description="Absolute path of the source root; default: the file's folder."
    )
    module: str | None = Field(
        None, description="The module's dotted name under the root; default: the file's stem."
    )
    kernel: str
    specialisations: list[Specialisation] = Field(min_length=1)
    target: str = Field("sm_90", description="The GPU the bytecode is generated for.")
    cubin_targets: list[str] = Field(default_factory=lambda: ["sm_90", "sm_100"])
    bytecode_version: str = "13.3"
    entry_symbol: EntrySymbol = Field(default_factory=lambda: EntrySymbol())
    tileirdisasm: str = Field(description="Path of the tileirdisasm binary.")


class VariantTimings(_Strict):
    """Seconds spent producing each artefact of one variant."""

    bytecode_s: float
    mlir_s: float
    cubin_s: dict[str, float]


class VariantExport(_Strict):
    variant: str
    symbol: str
    bytecode: str = Field(description="File name inside the output directory.")
    mlir: str
    loc_mlir: str = Field(description="The MLIR text with source locations (tileirdisasm -g).")
    cubins: dict[str, str] = Field(description="Target -> cubin file name.")
    timings: VariantTimings
    specialisation: Specialisation
    dump: str | None = Field(
        None,
        description="The Tile IR bytecode dump the variant was copied from (its spec's "
        "reference_bytecode); None when it was exported from the source.",
    )


class ExportRecord(_Strict):
    """export.json: what was exported, from what, with which tools, how fast."""

    kernel: str
    source: str
    target: str
    bytecode_version: str
    cuda_tile_version: str
    tileiras_version: str
    import_s: float = Field(description="Importing cuda.tile and the kernel module.")
    process_s: float = Field(0.0, description="The sandboxed process, start to end.")
    variants: list[VariantExport]


ErrorKind = Literal[
    "spec_error",
    "syntax_error",
    "import_error",
    "kernel_not_found",
    "signature_mismatch",
    "compile_error",
    "toolchain_error",
    "timeout",
    "memory_limit",
    "crash",
    "sandbox_unavailable",
]


class ExportError(_Strict):
    """A problem with the user's kernel or spec, located where possible."""

    kind: ErrorKind
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    variant: str | None = None
    source_line: str | None = Field(None, description="The text of the offending line.")

    def one_line(self) -> str:
        where = ""
        if self.file is not None:
            where = f"{self.file}:{self.line}: " if self.line is not None else f"{self.file}: "
        variant = f" [variant {self.variant}]" if self.variant else ""
        return f"{where}{self.kind}{variant}: {self.message}"


class ExportResponse(_Strict):
    """What the sandboxed process hands back: a record, or an error."""

    record: ExportRecord | None = None
    error: ExportError | None = None
