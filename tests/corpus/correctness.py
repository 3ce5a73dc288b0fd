"""Launch every corpus kernel on a GPU and check it against its reference.

For each port spec and each test configuration: build the arguments the spec
describes (shapes, layouts, dtypes, init), launch the kernel through
`ct.launch`, run the spec's reference function on the same inputs and compare
with the spec's per-dtype tolerances. It also checks that the launch derives
exactly the facts the reference export assumes: the entry symbol cuTile
mangles for the real arguments must equal the one `toolchain.reference_export`
derives from the spec.

    python tests/corpus/correctness.py [--json REPORT] [SPEC ...]

Needs torch and a CUDA GPU (the pytest wrapper skips without them).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from schemas.port_spec import (  # noqa: E402
    ArrayInit,
    ArrayParam,
    PortSpec,
    ResolvedArray,
    ResolvedConfig,
    load_port_spec,
    spec_relative,
)
from schemas.spec_expr import evaluate  # noqa: E402

CORPUS = ROOT / "examples" / "kernels"


@dataclass
class ConfigResult:
    spec: str
    config: str
    variant: str
    dtype: str
    ok: bool
    max_abs_err: float = 0.0
    mismatches: int = 0
    expected_symbol: str = ""
    launch_symbol: str = ""
    error: str = ""
    notes: list[str] = field(default_factory=list)


def _torch() -> Any:
    import torch

    return torch


def _load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _torch_dtype(name: str) -> Any:
    return getattr(_torch(), "bool" if name == "bool" else name)


def _bound(value: int | float | str | None, env: dict[str, Any]) -> float:
    """An init bound: a number or an expression; 0 when not given."""
    if value is None:
        return 0
    result = evaluate(value, env) if isinstance(value, str) else value
    if isinstance(result, str):
        raise ValueError(f"init bound {value!r} is not a number")
    return result


def _init_values(init: ArrayInit, shape: list[int], dtype: str, env: dict[str, Any]) -> Any:
    torch = _torch()
    dt = _torch_dtype(dtype)
    low, high = _bound(init.low, env), _bound(init.high, env)
    if init.kind == "randn":
        values = torch.randn(shape, device="cuda").to(dt)
    elif init.kind == "uniform":
        values = (torch.rand(shape, device="cuda") * (high - low) + low).to(dt)
    elif init.kind == "randint":
        values = torch.randint(int(low), int(high), shape, device="cuda").to(dt)
    elif init.kind == "arange":
        values = torch.arange(int(torch.tensor(shape).prod()), device="cuda").reshape(shape).to(dt)
    elif init.kind == "partition":
        cuts = torch.randint(0, int(high) + 1, (shape[0] - 2,), device="cuda").sort().values
        ends = torch.tensor([0, int(high)], device="cuda")
        values = torch.cat([ends[:1], cuts, ends[1:]]).to(dt)
    elif init.kind == "ones":
        values = torch.ones(shape, device="cuda", dtype=dt)
    else:
        values = torch.zeros(shape, device="cuda", dtype=dt)
    if init.special_value is not None:
        chosen = torch.rand(shape, device="cuda") < init.special_fraction
        values = torch.where(chosen, torch.full_like(values, init.special_value), values)
    return values


def _make_tensor(array: ResolvedArray, param: ArrayParam, env: dict[str, Any]) -> Any:
    """A tensor with exactly the resolved shape, strides and storage offset."""
    torch = _torch()
    span = sum((d - 1) * s for d, s in zip(array.shape, array.strides, strict=True)) + 1
    size = array.storage_offset + (span if all(array.shape) else 0) + 64
    flat = torch.zeros(size, device="cuda", dtype=_torch_dtype(array.dtype))
    view = flat.as_strided(array.shape, array.strides, array.storage_offset)
    view.copy_(_init_values(param.default_init(array.dtype), array.shape, array.dtype, env))
    return view


def _arguments(spec: PortSpec, resolved: ResolvedConfig) -> dict[str, Any]:
    env: dict[str, Any] = {**resolved.dims, **resolved.constants, **resolved.scalars}
    args: dict[str, Any] = {}
    for name, array in resolved.arrays.items():
        param = spec.arrays[name]
        if array.list_length is None:
            args[name] = _make_tensor(array, param, env)
        else:
            args[name] = [_make_tensor(array, param, env) for _ in range(array.list_length)]
    args.update(resolved.scalars)
    args.update(resolved.constants)
    return args


def _compare(out: Any, ref: Any, atol: float, rtol: float) -> tuple[int, float]:
    torch = _torch()
    got, want = out.double(), ref.double().to(out.device)
    both_nan = torch.isnan(got) & torch.isnan(want)
    diff = (got - want).abs()
    bad = ~both_nan & ~(diff <= atol + rtol * want.abs())
    finite = diff[~both_nan & torch.isfinite(diff)]
    return int(bad.sum()), float(finite.max()) if finite.numel() else 0.0


def _expected_symbol(kernel: Any, spec: PortSpec, resolved: ResolvedConfig) -> str:
    from toolchain._export_child import kernel_signature
    from toolchain.reference_export import specialise

    return str(kernel_signature(kernel, specialise(resolved), spec.entry_symbol).symbol)


def _launch_symbol(kernel: Any, ordered: list[Any]) -> str:
    from cuda.tile.compilation import CallingConvention, KernelSignature

    sig = KernelSignature.from_kernel_args(kernel, ordered, CallingConvention.cutile_python_v1())
    return str(sig.symbol)


def _scalar_forms(value: int | float, dtype: str) -> list[tuple[str, Any]]:
    """Ways a host may pass a scalar: a Python number, a NumPy scalar of the declared
    dtype, a 0-d tensor. The launch symbol says which one gives the declared type."""
    torch = _torch()
    forms: list[tuple[str, Any]] = [("python", value)]
    try:
        import numpy as np  # type: ignore[import-not-found]  # GPU hosts only

        forms.append(("numpy", getattr(np, dtype)(value)))
    except (ImportError, AttributeError):
        pass
    forms.append(("tensor", torch.tensor(value, dtype=_torch_dtype(dtype))))
    return forms


def _pick_scalar_forms(
    kernel: Any,
    spec: PortSpec,
    resolved: ResolvedConfig,
    args: dict[str, Any],
    names: list[str],
    expected: str,
) -> tuple[str, str]:
    """Choose how to pass scalars so that the launch compiles the expected signature."""
    launch = ""
    for form in ("python", "numpy", "tensor"):
        trial = dict(args)
        for name, value in resolved.scalars.items():
            forms = dict(_scalar_forms(value, resolved.scalar_dtypes[name]))
            if form not in forms:
                break
            trial[name] = forms[form]
        else:
            try:
                launch = _launch_symbol(kernel, [trial[n] for n in names])
            except Exception:
                continue
            if launch == expected:
                args.update(trial)
                return form, launch
    return "python", launch


def run_config(
    spec_path: Path, spec: PortSpec, kernel: Any, references: ModuleType, resolved: ResolvedConfig
) -> ConfigResult:
    import inspect

    import cuda.tile as ct

    torch = _torch()
    result = ConfigResult(spec_path.name, resolved.name, resolved.variant, resolved.dtype, False)
    torch.manual_seed(0)
    args = _arguments(spec, resolved)
    names = list(inspect.signature(kernel._pyfunc).parameters)
    ordered = [args[n] for n in names]
    result.expected_symbol = _expected_symbol(kernel, spec, resolved)
    if resolved.scalars:
        form, result.launch_symbol = _pick_scalar_forms(
            kernel, spec, resolved, args, names, result.expected_symbol
        )
        result.notes.append(f"scalars passed as {form} values")
        ordered = [args[n] for n in names]
    else:
        result.launch_symbol = _launch_symbol(kernel, ordered)
    inputs = {
        n: (v.clone() if hasattr(v, "clone") else v)
        for n, v in args.items()
        if n in spec.arrays and spec.arrays[n].role != "out"
    }
    inputs.update(resolved.scalars)
    inputs.update({c: resolved.constants[c] for c in spec.reference.pass_constants})
    hinted = kernel.replace_hints(**resolved.hints.as_kwargs()) if resolved.hints else kernel
    ct.launch(torch.cuda.current_stream(), resolved.grid, hinted, tuple(ordered))
    torch.cuda.synchronize()
    reference = getattr(references, spec.reference.function.split(":")[1])
    expected = reference(**inputs)
    outputs = [n for n, p in spec.arrays.items() if p.role != "in"]
    if not isinstance(expected, dict):
        expected = {outputs[0]: expected}
    tol = spec.tolerances[resolved.dtype]
    for name in outputs:
        bad, worst = _compare(args[name], expected[name], tol.atol, tol.rtol)
        result.mismatches += bad
        result.max_abs_err = max(result.max_abs_err, worst)
        if bad:
            result.notes.append(f"{name}: {bad} element(s) out of tolerance, max |err| {worst:g}")
    result.ok = result.mismatches == 0 and result.expected_symbol == result.launch_symbol
    return result


def check_spec(spec_path: Path) -> list[ConfigResult]:
    spec = load_port_spec(spec_path)
    module = _load_module(spec_relative(spec_path, spec.source), f"corpus_{spec.name}")
    ref_module, _ = spec.reference.function.split(":")
    references = _load_module(spec_relative(spec_path, f"{ref_module}.py"), "corpus_references")
    kernel = getattr(module, spec.kernel)
    results = []
    for config in spec.test_configs:
        resolved = spec.resolve(config, "test")
        try:
            results.append(run_config(spec_path, spec, kernel, references, resolved))
        except Exception as exc:
            failed = ConfigResult(
                spec_path.name, config.name, resolved.variant, config.dtype, False
            )
            failed.error = "".join(traceback.format_exception_only(exc)).strip()[-2000:]
            results.append(failed)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("specs", nargs="*", type=Path)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    specs = args.specs or sorted(CORPUS.glob("*.port.yaml"))
    results = [r for s in specs for r in check_spec(s)]
    for r in results:
        status = "ok" if r.ok else "FAIL"
        symbol = "" if r.expected_symbol == r.launch_symbol else "  symbol differs"
        print(f"{status:4} {r.spec:32} {r.config:28} max|err| {r.max_abs_err:.3g}{symbol}")
        for line in [*r.notes, *([r.error] if r.error else [])]:
            print(f"       {line}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    failed = sum(not r.ok for r in results)
    print(f"{len(results) - failed}/{len(results)} configurations pass")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
