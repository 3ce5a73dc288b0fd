"""The wrapper's compiled tensor-facts reader (`tileport_tensor_facts.cpp`, beside the
wrapper): where the wrapper looks for it, when it falls back to reading the key in
Python, the command that builds it, and what the reader keys. Building and reading
real tensors needs torch and a C++ compiler; those tests skip where either is
missing and say which."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from nodes.host_builder.library import CHECKOUT, create_workspace, load_wrapper

ENV = "TILEPORT_TENSOR_FACTS"


@pytest.fixture
def wrapper(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.delenv(ENV, raising=False)
    return load_wrapper(CHECKOUT.wrapper_path)


def test_the_reader_source_travels_beside_the_wrapper(wrapper: ModuleType, tmp_path: Path) -> None:
    """The wrapper builds the source it names from beside itself: the checkout's crate
    has it, and so does every workspace (a bundle copies the workspace's)."""
    assert CHECKOUT.tensor_facts_path.name == wrapper.TENSOR_FACTS_SOURCE
    assert CHECKOUT.tensor_facts_path.parent == CHECKOUT.wrapper_path.parent
    workspace = create_workspace(tmp_path / "workspace")
    assert workspace.tensor_facts_path.read_bytes() == CHECKOUT.tensor_facts_path.read_bytes()


def test_the_reader_is_looked_for_beside_the_wrapper_unless_the_environment_says(
    wrapper: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    beside = wrapper.tensor_facts_path()
    assert beside.parent == CHECKOUT.wrapper_path.parent
    assert beside.name.startswith("_tileport_tensor_facts.") and beside.suffix == ".so"
    monkeypatch.setenv(ENV, "python")
    assert wrapper.tensor_facts_path() is None
    monkeypatch.setenv(ENV, str(tmp_path / "reader.so"))
    assert wrapper.tensor_facts_path() == tmp_path / "reader.so"


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ("python", "Python ($TILEPORT_TENSOR_FACTS=python)"),
        ("missing.so", "Python (no missing.so beside the wrapper"),
        ("garbage.so", "Python (garbage.so does not load:"),
    ],
    ids=["told", "missing", "not a module"],
)
def test_without_a_usable_reader_the_key_is_read_in_python(
    wrapper: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    setting: str,
    said: str,
) -> None:
    (tmp_path / "garbage.so").write_bytes(b"not an ELF file")
    monkeypatch.setenv(ENV, setting if setting == "python" else str(tmp_path / setting))
    reader, found = wrapper.tensor_facts_reader(SimpleNamespace(__version__="2.11.0"))
    assert reader is None
    assert found.startswith(said)


def test_the_build_command_says_how_it_is_used_and_why_it_failed(
    wrapper: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    usage = subprocess.run(
        [sys.executable, str(CHECKOUT.wrapper_path)], capture_output=True, text=True, check=False
    )
    assert usage.returncode == 2 and "build-tensor-facts" in usage.stderr
    assert wrapper.main(["build-tensor-facts", "a", "b"]) == 2
    monkeypatch.setitem(sys.modules, "torch", None)  # as on a host without torch
    assert wrapper.main(["build-tensor-facts"]) == 1
    assert "build-tensor-facts: " in capsys.readouterr().err


# --- with torch and a C++ compiler ------------------------------------------------------

needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed here"
)
needs_compiler = pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler here")


@pytest.fixture(scope="module")
def built_reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wrapper = load_wrapper(CHECKOUT.wrapper_path)
    return Path(wrapper.build_tensor_facts(tmp_path_factory.mktemp("tensor_facts")))


@pytest.fixture
def reader(built_reader: Path, wrapper: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Any:
    import torch

    monkeypatch.setenv(ENV, str(built_reader))
    layout, found = wrapper.tensor_facts_reader(torch)
    assert layout is not None, found
    assert found == f"compiled ({built_reader.name}, torch {torch.__version__})"
    return layout


@pytest.mark.slow
@needs_torch
@needs_compiler
def test_the_reader_keys_what_the_checks_depend_on(reader: Any) -> None:
    """One key per layout: the same dtypes, extents, strides, devices and list lengths
    give equal packed facts (another tensor at another address included); any
    difference gives another key. Addresses come back in parameter order."""
    import torch

    def group(rows: int) -> list[Any]:
        return [torch.empty(rows, 16, dtype=torch.float16) for _ in range(3)]

    a, b = group(64), group(32)
    key, addresses, index = reader((a, b))
    assert addresses == [t.data_ptr() for t in a + b]
    assert index == -1  # CPU tensors: the wrapper keys them in Python, then refuses
    assert reader((group(64), group(32)))[0] == key
    x = torch.empty(8, 4, dtype=torch.float32)
    variants = {
        "same": (x, x),
        "transposed": (x.t(), x),
        "dtype": (x.half(), x),
        "extent": (x[:4], x),
        "stride": (x[:, ::2], x),
        "strides alone": (x.t().contiguous().t(), x),
        "list": ([x], x),
        "longer list": ([x, x], x),
        "other order": (x, x.t()),
    }
    keys = {name: reader(arrays)[0] for name, arrays in variants.items()}
    assert len(set(keys.values())) == len(keys)
    assert reader(([x], x))[0] == reader(((x,), x))[0]  # a list and a tuple alike


@pytest.mark.slow
@needs_torch
@needs_compiler
def test_the_reader_leaves_to_python_what_it_cannot_read_alike(reader: Any) -> None:
    """A torch.Tensor subclass (its attributes may be overridden), a non-tensor, an
    empty call: None, and the wrapper reads those in Python. A Parameter is a plain
    tensor to C++."""
    import torch

    class Tagged(torch.Tensor):
        pass

    x = torch.empty(4, 4)
    assert reader((x.as_subclass(Tagged),)) is None
    assert reader((torch.nn.Parameter(x),)) is not None
    assert reader((3, x)) is None
    assert reader(([],)) is None
    assert reader(()) is None
    assert reader((torch.empty(4, 4).to_sparse(),)) is None
    with pytest.raises(TypeError, match="tuple of arrays"):
        reader([x])


@pytest.mark.slow
@needs_torch
@needs_compiler
def test_a_reader_built_for_another_torch_is_not_used(
    built_reader: Path, wrapper: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setenv(ENV, str(built_reader))
    reader, found = wrapper.tensor_facts_reader(SimpleNamespace(__version__="0.0.1"))
    assert reader is None
    assert found == (
        f"Python ({built_reader.name} was built for torch {torch.__version__}, not 0.0.1)"
    )


@pytest.mark.slow
@needs_torch
@needs_compiler
def test_the_library_keys_with_the_reader_and_falls_back_to_python(
    built_reader: Path, wrapper: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once torch is imported the library finds the reader and says so; CPU tensors
    are not keyed (the checks refuse them); torch-like objects the reader leaves
    alone are keyed in Python."""
    import torch

    from nodes.host_builder.library import ensure_built

    monkeypatch.setenv(ENV, str(built_reader))
    library = wrapper.Library(ensure_built())
    assert library._find_torch_readers() is not None
    assert library.tensor_facts.startswith("compiled (")
    # The current stream stood in: this host may have no GPU to ask.
    monkeypatch.setattr(library, "_raw_stream", lambda index: 0x5000 + index)
    x = torch.empty(4, 8)
    assert library._tensor_layout("softmax", (x, x)) is None

    class CudaLike:
        dtype, shape = "float32", (4, 8)

        def stride(self) -> tuple[int, int]:
            return (8, 1)

        def data_ptr(self) -> int:
            return 0x7000

        def get_device(self) -> int:
            return 0

    found = library._tensor_layout("softmax", (CudaLike(), CudaLike()))
    assert found is not None
    key, addresses = found
    assert key[1] == 0x5000 and key[3] == (("float32", (4, 8), (8, 1)),) * 2
    assert addresses == [0x7000] * 2
