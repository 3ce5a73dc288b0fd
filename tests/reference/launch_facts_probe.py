"""Record the facts a real cuTile launch derives from real arguments (GPU host).

For a set of torch tensors (dtypes, shapes, contiguous / transposed / padded /
sliced / strided layouts), scalars and lists of tensors, ask cuTile which
constraints a launch would compile for (`KernelSignature.from_kernel_args`)
and write them as JSON. tests/reference/data/launch_facts.json was produced by
this script on an H200; test_launch_facts.py checks that
`toolchain.reference_export.launch_facts` predicts every recorded case.

    python tests/reference/launch_facts_probe.py OUT.json
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import cuda.tile as ct
import torch
from cuda.tile.compilation import CallingConvention, KernelSignature


@ct.kernel  # type: ignore[untyped-decorator]
def one_param(x: Any) -> None:
    pass


def _plain(value: Any) -> Any:
    if isinstance(value, ct.DType):
        return value.name
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"kind": type(value).__name__, **out}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def _constraint(arg: Any) -> Any:
    sig = KernelSignature.from_kernel_args(one_param, (arg,), CallingConvention.cutile_python_v1())
    return _plain(sig.parameters[0])


def _tensor_cases() -> list[tuple[str, Any]]:
    cases: list[tuple[str, Any]] = []
    shapes = [(4096, 2048), (37, 1000), (129, 781), (100, 8), (1, 1), (2, 3), (64, 24)]
    for dtype in (
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.int8,
        torch.int32,
        torch.int64,
    ):
        for shape in shapes:
            base = torch.zeros(shape, device="cuda", dtype=dtype)
            cases.append((f"contiguous {dtype} {shape}", base))
            cases.append((f"transposed {dtype} {shape}", base.t()))
    for n in (1000003, 4096, 77777, 5, 6, 12):
        cases.append((f"1-d float32 {n}", torch.zeros(n, device="cuda")))
        cases.append((f"1-d float16 {n}", torch.zeros(n, device="cuda", dtype=torch.float16)))
    wide = torch.zeros(64, 1030, device="cuda", dtype=torch.float16)
    cases.append(("padded pitch 1030, f16 (64, 1000)", wide[:, :1000]))
    cases.append(("padded pitch 1030, f16 (64, 1024)", wide[:, :1024]))
    cases.append(("sliced by 1 column, f16", wide[:, 1:]))
    cases.append(("sliced by 4 columns, f16", wide[:, 4:]))
    cases.append(("sliced by 8 columns, f16", wide[:, 8:]))
    cases.append(("every other column, f16", wide[:, ::2]))
    f32 = torch.zeros(48, 256, device="cuda")
    cases.append(("sliced by 1 column, f32", f32[:, 1:]))
    cases.append(("sliced by 2 columns, f32", f32[:, 2:]))
    cases.append(("sliced by 4 columns, f32", f32[:, 4:]))
    cases.append(("every fourth row, f32", f32[::4]))
    cases.append(
        (
            "3-d view (M, 2, H) of (M, 2H), bf16",
            torch.zeros(77, 6000, device="cuda", dtype=torch.bfloat16).view(77, 2, 3000),
        )
    )
    cases.append(
        (
            "4-d view (T, H, 2, 64), f16",
            torch.zeros(33, 12, 128, device="cuda", dtype=torch.float16).view(33, 12, 2, 64),
        )
    )
    cases.append(
        (
            "permuted 3-d (B, S, D) -> (B, D, S), f32",
            torch.zeros(4, 100, 64, device="cuda").permute(0, 2, 1),
        )
    )
    cases.append(("broadcast row (expand), f32", torch.zeros(1, 256, device="cuda").expand(8, 256)))
    return cases


def _case(name: str, arg: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name}
    if isinstance(arg, torch.Tensor):
        entry.update(
            dtype=str(arg.dtype).removeprefix("torch."),
            shape=list(arg.shape),
            strides=list(arg.stride()),
            storage_offset=arg.storage_offset(),
            base_address_mod_256=arg.data_ptr() % 256,
        )
    else:
        entry["value"] = repr(arg)
    try:
        entry["constraint"] = _constraint(arg)
    except Exception as exc:  # recorded: some arguments are refused at launch
        entry["refused"] = f"{type(exc).__name__}: {exc}"
    return entry


def main(out_path: str) -> int:
    entries = [_case(name, arg) for name, arg in _tensor_cases()]
    lists = {
        "list of 3 f16 (256, 512)": [
            torch.zeros(256, 512, device="cuda", dtype=torch.float16) for _ in range(3)
        ],
        "list of 2 f32 (100, 77)": [torch.zeros(100, 77, device="cuda") for _ in range(2)],
    }
    for name, value in lists.items():
        entry = _case(name, value)
        entry["element"] = _case("element", value[0])
        entries.append(entry)
    scalars: dict[str, Any] = {
        "python int 5": 5,
        "python int 2**40": 2**40,
        "python float 0.5": 0.5,
        "python bool": True,
        "torch int64 0-d": torch.tensor(7, dtype=torch.int64),
        "torch float32 0-d": torch.tensor(0.5, dtype=torch.float32),
    }
    try:
        import numpy as np  # type: ignore[import-not-found]  # GPU hosts only

        scalars.update(
            {
                "numpy int64": np.int64(7),
                "numpy int32": np.int32(7),
                "numpy float32": np.float32(0.5),
                "numpy float64": np.float64(0.5),
            }
        )
    except ImportError:
        pass
    entries += [_case(name, value) for name, value in scalars.items()]
    with open(out_path, "w") as out:
        json.dump({"device": torch.cuda.get_device_name(), "cases": entries}, out, indent=1)
    print(f"recorded {len(entries)} cases on {torch.cuda.get_device_name()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
