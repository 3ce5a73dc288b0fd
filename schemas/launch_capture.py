"""Launches recorded on a GPU host by intercepting `cuda.tile.launch`.

`CapturedLaunch` holds what cuTile specialises on at launch: the kernel, the
grid, the constants, the scalars and, for each array argument, its dtype, shape,
strides (in elements) and the alignment of its base address. That is enough to
redo the reference export on a machine without a GPU (`nodes.analyzer.capture`).

`LaunchRecord` is one line of a launch file that `tileport capture` writes
(docs/CAPTURE.md). Read a whole file with

    records = read_launch_records("launches.jsonl")   # list[LaunchRecord]

which raises `LaunchRecordError` (a `ValueError` with `.path`, `.line`,
`.reason`) at the first line that is not a record. `record.args` holds one
`TensorArg` / `IntArg` / `FloatArg` / `BoolArg` / `SequenceArg` (kind list or
tuple, with `items`) / `OtherArg` per name of `record.params`; `grid` is always
three extents; `symbol`, `hints`, `hints_by_target` and tensors' `min`/`max` and
`values` are None in records that predate them. An integer or bool tensor small
enough (`toolchain.launch_hook.MAX_RECORDED_VALUES` elements) carries its values,
row-major, so that a spec can give the kernel the same indices (a permutation,
sorted unique ids) rather than random ones.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from schemas.port_spec import INTEGER_RANGES, DTypeName


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CapturedArray(_Strict):
    dtype: DTypeName
    shape: list[int] = Field(description="Extents; every entry >= 0.")
    strides: list[int] = Field(description="In elements, as the launch saw them.")
    base_addr_divisible_by: int = Field(
        ge=1, description="The largest power of two (at most 16) dividing the base address."
    )
    list_length: int | None = Field(
        None, ge=0, description="Set for a list of arrays; the facts are its first element's."
    )

    @model_validator(mode="after")
    def _rank_agrees(self) -> Self:
        if len(self.shape) != len(self.strides):
            raise ValueError(f"shape {self.shape} and strides {self.strides} differ in rank")
        if any(extent < 0 for extent in self.shape):
            raise ValueError(f"negative extent in shape {self.shape}")
        return self


class CapturedScalar(_Strict):
    dtype: DTypeName = Field(description="The type cuTile gives the Python value.")
    value: bool | int | float


class CapturedLaunch(_Strict):
    kernel: str = Field(min_length=1, description="The @ct.kernel function's name.")
    grid: tuple[int, int, int]
    arrays: dict[str, CapturedArray] = Field(default_factory=dict)
    constants: dict[str, bool | int | float] = Field(default_factory=dict)
    scalars: dict[str, CapturedScalar] = Field(default_factory=dict)
    hints: dict[str, int] = Field(
        default_factory=dict, description="num_ctas / occupancy / num_worker_warps set on it."
    )
    parameters: list[str] = Field(description="The kernel's parameters, in order.")

    @model_validator(mode="after")
    def _every_parameter_once(self) -> Self:
        seen = [*self.arrays, *self.constants, *self.scalars]
        if sorted(seen) != sorted(self.parameters):
            raise ValueError(f"captured {sorted(seen)} for parameters {self.parameters}")
        return self


# -- launch records: one JSON line per distinct launch (`tileport capture`) -----------


# The dtypes whose tensors may carry their values (`TensorArg.values`).
VALUE_DTYPES = frozenset(INTEGER_RANGES) | {"bool"}


class TensorArg(_Strict):
    kind: Literal["tensor"]
    dtype: str = Field(min_length=1, description="torch's name without `torch.`: float16, int32.")
    shape: list[StrictInt]
    stride: list[StrictInt] = Field(description="In elements.")
    align16: bool = Field(description="The base address is divisible by 16.")
    contig: bool = Field(description="Row-major contiguous.")
    min: StrictInt | None = Field(None, description="Integer tensors: smallest value at launch.")
    max: StrictInt | None = Field(None, description="Integer tensors: largest value at launch.")
    values: list[StrictInt | StrictBool] | None = Field(
        None,
        description="Small integer and bool tensors: every value at launch, row-major "
        "(integers for integer dtypes, booleans for bool).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if len(self.shape) != len(self.stride):
            raise ValueError(f"shape {self.shape} and stride {self.stride} differ in rank")
        if (self.min is None) != (self.max is None):
            raise ValueError("min and max come together")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}")
        if self.values is not None:
            self._check_values(self.values)
        return self

    def _check_values(self, values: list[int | bool]) -> None:
        if self.dtype not in VALUE_DTYPES:
            raise ValueError(f"values are recorded for integer and bool tensors, not {self.dtype}")
        count = math.prod(self.shape)
        if len(values) != count:
            raise ValueError(f"{len(values)} values for shape {self.shape} ({count} elements)")
        boolean = self.dtype == "bool"
        if any(isinstance(value, bool) != boolean for value in values):
            kind = "booleans" if boolean else "integers"
            raise ValueError(f"the values of a {self.dtype} tensor are {kind}")
        if values and self.min is not None and (self.min, self.max) != (min(values), max(values)):
            raise ValueError(
                f"min {self.min} and max {self.max} disagree with the values "
                f"({min(values)}, {max(values)})"
            )


class IntArg(_Strict):
    kind: Literal["int"]
    value: StrictInt


class FloatArg(_Strict):
    kind: Literal["float"]
    value: StrictFloat


class BoolArg(_Strict):
    kind: Literal["bool"]
    value: StrictBool


class SequenceArg(_Strict):
    kind: Literal["list", "tuple"]
    items: list[LaunchArg]


class OtherArg(_Strict):
    """A value the recorder has no kind for (kept so the record stays complete)."""

    kind: Literal["other"]
    type: str
    repr: str


LaunchArg = Annotated[
    TensorArg | IntArg | FloatArg | BoolArg | SequenceArg | OtherArg,
    Field(discriminator="kind"),
]
SequenceArg.model_rebuild()


class LaunchRecord(_Strict):
    """One launch of a `@ct.kernel`, as `tileport capture` writes it; also parses
    the older records that lack `symbol`, `hints`, `hints_by_target` and ranges."""

    test: str | None = Field(description="The pytest id that launched it; None outside pytest.")
    kernel: str = Field(min_length=1)
    file: str = Field(
        min_length=1,
        description="Relative to the capture's --source-root (absolute outside it); without "
        "one, relative to the sys.path entry holding it.",
    )
    line: StrictInt = Field(ge=1, description="First line of the definition (its first decorator).")
    grid: tuple[StrictInt, StrictInt, StrictInt]
    params: list[str]
    args: list[LaunchArg]
    symbol: str | None = Field(None, description="Mangled entry symbol of the specialisation.")
    hints: str | None = Field(None, description="As the Tile IR entry prints them.")
    hints_by_target: dict[str, dict[str, StrictInt]] | None = Field(
        None, description="{target: {num_ctas / occupancy / num_worker_warps: value}}."
    )

    @field_validator("grid", mode="before")
    @classmethod
    def _pad_grid(cls, value: object) -> object:
        if isinstance(value, list | tuple) and 1 <= len(value) < 3:
            return [*value, *([1] * (3 - len(value)))]
        return value

    @model_validator(mode="after")
    def _one_arg_per_param(self) -> Self:
        if len(self.params) != len(self.args):
            raise ValueError(f"{len(self.params)} params but {len(self.args)} args")
        return self

    def identity(self) -> str:
        """What makes two launches the same: everything but the test that made it."""
        return json.dumps(self.model_dump(mode="json", exclude={"test"}), sort_keys=True)


class LaunchRecordError(ValueError):
    """A launch file's line that is not a launch record."""

    def __init__(self, path: Path, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


def parse_launch_record(text: str) -> LaunchRecord:
    """One JSON line to a record; raises `ValueError` (pydantic's or json's)."""
    return LaunchRecord.model_validate(json.loads(text))


def read_launch_records(path: str | Path) -> list[LaunchRecord]:
    """Every record of a launch file, in file order; blank lines are skipped.
    Raises `LaunchRecordError` naming the first bad line (1-based) and
    `OSError` when the file cannot be read."""
    source = Path(path)
    records: list[LaunchRecord] = []
    with source.open(encoding="utf-8") as stream:
        for number, text in enumerate(stream, start=1):
            if not text.strip():
                continue
            try:
                records.append(parse_launch_record(text))
            except json.JSONDecodeError as error:
                raise LaunchRecordError(source, number, f"not JSON: {error.msg}") from error
            except ValidationError as error:
                raise LaunchRecordError(source, number, _first_problem(error)) from error
    return records


def _first_problem(error: ValidationError) -> str:
    problems = error.errors()
    first = problems[0]
    where = ".".join(str(part) for part in first["loc"]) or "record"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{where}: {first['msg']}{more}"


def distinct_launches(files: list[list[LaunchRecord]]) -> list[LaunchRecord]:
    """The records of several launch files, in order, each distinct launch once."""
    seen: set[str] = set()
    merged: list[LaunchRecord] = []
    for records in files:
        for record in records:
            if record.identity() not in seen:
                seen.add(record.identity())
                merged.append(record)
    return merged
