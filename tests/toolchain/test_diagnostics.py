"""A tool's diagnostic leads with its sentence and one location to open."""

from __future__ import annotations

from toolchain.diagnostics import lead_with_sentence

SUBPROGRAM = (
    '#cuda_tile.di_subprogram<file = <"kernel.rs" in "/run">, line = 52, '
    'name = "k", linkageName = "k@kernel:52:14", scopeLine = 52>'
)
VERIFIER = (
    'tileirdisasm exited 3: loc(callsite(#cuda_tile.di_loc<loc("/run/kernel.rs":137:67) in '
    f'{SUBPROGRAM}> at #cuda_tile.di_loc<loc("/run/kernel.rs":52:4) in {SUBPROGRAM}>)): '
    "error: 'cuda_tile.load_ptr_tko' op failed to verify that type of 'paddingValue' must "
    "match the type of 'result'\n"
    "error: verification failed for deserialized cuda_tile::ModuleOp\n"
    "error: failed to read provided Tile IR bytecode"
)


def test_the_sentence_comes_first_with_the_innermost_location() -> None:
    assert lead_with_sentence(VERIFIER) == (
        "tileirdisasm exited 3: 'cuda_tile.load_ptr_tko' op failed to verify that type of "
        "'paddingValue' must match the type of 'result' (at /run/kernel.rs:137:67); "
        "error: verification failed for deserialized cuda_tile::ModuleOp; "
        "error: failed to read provided Tile IR bytecode"
    )
    assert len(lead_with_sentence(VERIFIER)) < len(VERIFIER) / 2


def test_a_message_without_a_diagnostic_is_kept() -> None:
    assert lead_with_sentence("tileiras timed out") == "tileiras timed out"


def test_a_diagnostic_without_a_location() -> None:
    assert lead_with_sentence("error: unknown op") == "unknown op"
