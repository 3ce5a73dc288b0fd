"""A cubin beside its SASS: sections, flags and kernel attributes, compared on the
cubins the softmax corpus port's GPU run recorded (reference and port of two
configurations)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from toolchain.cubin_elf import (
    CubinFormatError,
    attributes,
    compare_attributes,
    compare_cubin_elf,
    read_cubin,
)
from toolchain.env import REPO_ROOT

CUBINS = REPO_ROOT / (
    "tests/service/fixtures/h200_completion/service/artifacts/runs/"
    "38479f136dcc4cf691b49ed10af185f0/generated/generated"
)
RAGGED = CUBINS / "row__ragged_f32"


def test_the_same_kernel_from_two_compiles_has_the_same_code_and_attributes() -> None:
    found = compare_cubin_elf(RAGGED / "reference.sm_90.cubin", RAGGED / "generated.sm_90.cubin")
    assert found.text_identical and found.attributes_identical
    assert found.flags[0] == found.flags[1]
    assert not found.only_reference and not found.only_port
    assert found.summary().startswith("the kernel's code is byte-identical")


def test_another_specialisation_differs_in_code_and_attributes() -> None:
    other = CUBINS / "row__pow2_f16" / "generated.sm_90.cubin"
    found = compare_cubin_elf(RAGGED / "reference.sm_90.cubin", other)
    assert not found.text_identical and not found.attributes_identical
    assert "code bytes differ" in found.summary()


def test_sections_are_known_without_the_kernel_name() -> None:
    sections = read_cubin((RAGGED / "generated.sm_90.cubin").read_bytes()).sections
    assert {".text.<kernel>", ".nv.info.<kernel>", ".nv.info"} <= set(sections)


def test_debug_sections_and_flags_of_one_side_are_named(tmp_path: Path) -> None:
    blob = bytearray((RAGGED / "generated.sm_90.cubin").read_bytes())
    struct.pack_into("<I", blob, 0x30, struct.unpack_from("<I", blob, 0x30)[0] | 0x1000000)
    flagged = tmp_path / "flagged.cubin"
    flagged.write_bytes(bytes(blob))
    found = compare_cubin_elf(RAGGED / "generated.sm_90.cubin", flagged)
    assert found.text_identical and found.flags[0] != found.flags[1]
    assert "ELF flags" in found.summary()


def test_an_attribute_differing_only_in_its_symbol_counts_as_the_same() -> None:
    def info(symbol: int, value: int) -> bytes:
        # EIATTR_PARAM_CBANK-like: format 4 (size + payload), symbol index, then data
        return struct.pack("<BBHIHH", 4, 0x0A, 8, symbol, 0x210, value) + struct.pack(
            "<BBH", 3, 0x1B, 7
        )

    assert attributes(info(16, 0x40)) == [
        (4, 0x0A, struct.pack("<IHH", 16, 0x210, 0x40)),
        (3, 0x1B, struct.pack("<H", 7)),
    ]
    assert compare_attributes(info(16, 0x40), info(21, 0x40)) == (True, 1)
    assert compare_attributes(info(16, 0x40), info(16, 0x48)) == (False, 0)


def test_a_file_that_is_not_a_cubin_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CubinFormatError, match="not a little-endian ELF64"):
        read_cubin(b"#!/bin/sh\n")
    truncated = (RAGGED / "generated.sm_90.cubin").read_bytes()[:80]
    with pytest.raises(CubinFormatError, match="truncated"):
        read_cubin(truncated)
