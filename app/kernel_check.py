"""Static check that an uploaded file is a GPU kernel source, run as a child
process in the sandbox (`toolchain.sandbox`: it sees only the interpreter and
this file; `python -I -S kernel_check.py`, source on stdin, JSON on stdout).

The source is untrusted: it is parsed, never imported or executed, and the
process lowers its own resource limits before it reads a byte, so a hostile
input can only exhaust this short-lived child. Only the standard library is used,
so the child runs without site-packages."""

from __future__ import annotations

import ast
import json
import resource
import sys
from typing import Any

MEMORY_LIMIT_BYTES = 512 * 1024 * 1024
CPU_LIMIT_S = 5
# Decorators that make a function a kernel, by the module they come from.
KERNEL_DECORATORS = {"cuda.tile": {"kernel"}, "triton": {"jit"}}


def limit_resources() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT_S, CPU_LIMIT_S))
    resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def module_aliases(tree: ast.Module) -> dict[str, str]:
    """Local names bound to kernel modules or to their decorators: `ct` -> `cuda.tile`,
    `kernel` -> `cuda.tile.kernel`."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for name in node.names:
                if name.name in KERNEL_DECORATORS:
                    aliases[name.asname or name.name] = name.name
        elif isinstance(node, ast.ImportFrom) and node.module in KERNEL_DECORATORS:
            for name in node.names:
                aliases[name.asname or name.name] = f"{node.module}.{name.name}"
    return aliases


def dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        return dotted_name(node.func)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def is_kernel_decorator(decorator: ast.expr, aliases: dict[str, str]) -> bool:
    name = dotted_name(decorator)
    if name is None:
        return False
    head, _, rest = name.partition(".")
    full = aliases.get(head, head) + (f".{rest}" if rest else "")
    module, _, attr = full.rpartition(".")
    return attr in KERNEL_DECORATORS.get(module, set())


def find_kernels(source: str) -> dict[str, Any]:
    try:
        tree = ast.parse(source, filename="<upload>")
    except SyntaxError as error:
        return {"ok": False, "reason": "syntax_error", "line": error.lineno, "message": error.msg}
    except (ValueError, RecursionError, MemoryError) as error:
        return {"ok": False, "reason": "unparsable", "line": None, "message": str(error)[:200]}
    aliases = module_aliases(tree)
    kernels = [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and any(is_kernel_decorator(d, aliases) for d in node.decorator_list)
    ]
    if not kernels:
        return {
            "ok": False,
            "reason": "no_kernel",
            "line": None,
            "message": "no function decorated with cuda.tile.kernel (ct.kernel) or triton.jit",
        }
    return {"ok": True, "kernels": kernels}


def main() -> int:
    limit_resources()
    data = sys.stdin.buffer.read()
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as error:
        result: dict[str, Any] = {
            "ok": False,
            "reason": "not_utf8",
            "line": None,
            "message": f"not UTF-8 text (byte {error.start})",
        }
    else:
        result = find_kernels(source)
    sys.stdout.write(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
