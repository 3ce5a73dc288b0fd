# SPDX-License-Identifier: MIT

"""tileport's compiled launch for the wrappers it writes into TileGym's cutile-rs
backend: `launch(symbol, layout, args, grid, stream)` packs `ct.launch`'s arguments
off the torch tensors in C++ (`tileport_launch.cpp`, beside this file) and calls the
port's symbol; it returns the symbol's rc, or None where the wrapper's Python packer
must make the launch (a dtype not learned yet, a tensor subclass, anything the packer
refuses with its own message). Hand-written; copied as it is into a TileGym checkout.

The module is built on the first launch against the torch this process imports, with
$CXX (default c++), into a cache keyed by the source, torch and Python
($TILEPORT_LAUNCH_CACHE, default ~/.cache/tileport-launch); a later process finds it
there. Where it cannot be built or loaded, every launch is packed in Python, and the
first says why in the log. $TILEPORT_LAUNCH=python packs every launch in Python.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import subprocess
import sysconfig
from pathlib import Path

try:
    from tilegym.logger import get_logger

    logger = get_logger(__name__)
except ImportError:
    logger = logging.getLogger(__name__)

_SOURCE = Path(__file__).with_name("tileport_launch.cpp")
_MODULE = "_tileport_launch"


def launch(symbol, layout, args, grid, stream):
    """The first launch: loads the compiled module (building it once), then makes
    the launch with it; every later call goes to the module's `launch` directly."""
    _bind()
    return launch(symbol, layout, args, grid, stream)


def learn(tensor, code):
    """Tells the compiled launch ffi_util's dtype code of `tensor`'s dtype."""
    _bind()
    learn(tensor, code)


def _bind():
    """Rebinds `launch` and `learn` to the compiled module's, or to the Python
    packer's (launch nothing, learn nothing) where there is none."""
    global launch, learn
    module = _compiled()
    launch, learn = (module.launch, module.learn) if module else (_packed_in_python, _no_codes)


def _packed_in_python(symbol, layout, args, grid, stream):
    return None


def _no_codes(tensor, code):
    return None


def _compiled():
    """The compiled module, or None with the reason logged."""
    if os.environ.get("TILEPORT_LAUNCH") == "python":
        return None
    try:
        import torch

        path = _module_path(torch)
        if not path.is_file():
            _build(torch, path)
        loader = importlib.machinery.ExtensionFileLoader(_MODULE, str(path))
        spec = importlib.util.spec_from_file_location(_MODULE, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except Exception as error:  # any failure leaves the Python packer, which always works
        logger.warning("tileport launches are packed in Python: %s", error)
        return None
    return module


def _module_path(torch):
    """Where the module built from this source for this torch and Python lies."""
    key = hashlib.sha256()
    key.update(_SOURCE.read_bytes())
    key.update(torch.__version__.encode())
    key.update(str(torch._C._GLIBCXX_USE_CXX11_ABI).encode())
    cache = os.environ.get("TILEPORT_LAUNCH_CACHE") or Path.home() / ".cache" / "tileport-launch"
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return Path(cache) / key.hexdigest()[:16] / (_MODULE + suffix)


def _build(torch, target):
    """Compiles the module into `target` (written whole or not at all, so processes
    building at once each see a module that loads)."""
    from torch.utils import cpp_extension

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    libraries = cpp_extension.library_paths()
    command = [
        os.environ.get("CXX", "c++"),
        "-O2",
        "-std=c++20",
        "-shared",
        "-fPIC",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
        f'-DTILEPORT_TORCH_VERSION="{torch.__version__}"',
        *(f"-I{include}" for include in cpp_extension.include_paths()),
        f"-I{sysconfig.get_paths()['include']}",
        str(_SOURCE),
        "-o",
        str(partial),
        *(f"-L{library}" for library in libraries),
        *(f"-Wl,-rpath,{library}" for library in libraries),
        "-ltorch_python",
        "-ltorch_cpu",
        "-lc10",
    ]
    logger.info("building %s for torch %s", target, torch.__version__)
    built = subprocess.run(command, capture_output=True, text=True, check=False)
    if built.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"building {target.name} failed:\n{built.stderr[-2000:]}")
    os.replace(partial, target)
