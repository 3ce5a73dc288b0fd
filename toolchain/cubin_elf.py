"""What a cubin holds beside its SASS: the ELF header's flags, its sections, and the
kernel's attributes (`.nv.info.<kernel>`: parameter bank, registers, shared memory,
barriers...), compared between two cubins of the same kernel.

Two JITs name the kernel differently (cuTile Python's mangled symbol, cutile-rs's
`<kernel>_entry`), so a section is known by its name with the kernel's dropped, and
an attribute that differs only in a symbol index (its payload's first four bytes,
the ELF symbol it applies to) counts as the same. Standard library only: a cubin is
a little-endian ELF64 file."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

_KERNEL_SECTIONS = (".text.", ".nv.info.", ".nv.shared.", ".nv.constant0.", ".rela.text.")
_NOBITS = 8
_EIFMT_SVAL = 4  # an attribute with a size and a payload; the others are 4 bytes in all


class CubinFormatError(ValueError):
    """The file is not a cubin this reader understands."""


@dataclass(frozen=True)
class Section:
    flags: int
    size: int
    data: bytes  # empty where the section occupies no file space (NOBITS)


_ABSENT = Section(0, 0, b"")


@dataclass(frozen=True)
class CubinElf:
    flags: int
    sections: dict[str, Section]  # by name, the kernel's name dropped


@dataclass(frozen=True)
class ElfComparison:
    text_identical: bool
    """The kernel's machine code, byte for byte."""
    attributes_identical: bool
    """The kernel's `.nv.info` attributes, symbol indices aside."""
    symbol_index_only: int
    """Attributes that differ only in the symbol they name."""
    flags: tuple[int, int]
    """The ELF header's e_flags: (reference, port)."""
    only_reference: tuple[str, ...]
    only_port: tuple[str, ...]
    differing_sections: tuple[str, ...]
    """Sections on both sides with other contents (symbol and string tables aside)."""

    def summary(self) -> str:
        """One sentence on what differs beyond the SASS."""
        parts = [
            "the kernel's code is byte-identical"
            if self.text_identical
            else "the kernel's code bytes differ",
            "its attributes (.nv.info) are identical"
            + (
                f" but for the symbol index in {self.symbol_index_only} of them"
                if self.symbol_index_only
                else ""
            )
            if self.attributes_identical
            else "its attributes (.nv.info) differ",
        ]
        if self.flags[0] != self.flags[1]:
            parts.append(f"ELF flags {self.flags[0]:#x} (reference) against {self.flags[1]:#x}")
        if self.only_reference:
            parts.append("only the reference has " + ", ".join(self.only_reference))
        if self.only_port:
            parts.append("only the port has " + ", ".join(self.only_port))
        if self.differing_sections:
            parts.append("other contents in " + ", ".join(self.differing_sections))
        return "; ".join(parts)


def read_cubin(blob: bytes) -> CubinElf:
    if blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1:
        raise CubinFormatError("not a little-endian ELF64 file")
    try:
        (flags,) = struct.unpack_from("<I", blob, 0x30)
        (table,) = struct.unpack_from("<Q", blob, 0x28)
        entry_size, count, names_index = struct.unpack_from("<HHH", blob, 0x3A)
        headers = [
            struct.unpack_from("<IIQQQQIIQQ", blob, table + i * entry_size) for i in range(count)
        ]
        names_offset = headers[names_index][4]
    except (struct.error, IndexError) as exc:
        raise CubinFormatError(f"truncated ELF headers: {exc}") from None
    sections: dict[str, Section] = {}
    for name_at, kind, section_flags, _, offset, size, _, _, _, _ in headers[1:]:
        start = names_offset + name_at
        name = blob[start : blob.index(b"\0", start)].decode("ascii", "replace")
        data = b"" if kind == _NOBITS else blob[offset : offset + size]
        sections[_without_kernel(name)] = Section(section_flags, size, data)
    return CubinElf(flags=flags, sections=sections)


def _without_kernel(name: str) -> str:
    for prefix in _KERNEL_SECTIONS:
        if name.startswith(prefix):
            return prefix + "<kernel>"
    return name


def attributes(info: bytes) -> list[tuple[int, int, bytes]]:
    """The (format, attribute, payload) records of an `.nv.info` section."""
    records = []
    at = 0
    while at + 4 <= len(info):
        form, attribute = info[at], info[at + 1]
        if form == _EIFMT_SVAL:
            (size,) = struct.unpack_from("<H", info, at + 2)
            records.append((form, attribute, info[at + 4 : at + 4 + size]))
            at += 4 + size
        else:
            records.append((form, attribute, info[at + 2 : at + 4]))
            at += 4
    return records


def compare_attributes(reference: bytes, port: bytes) -> tuple[bool, int]:
    """Whether two `.nv.info` sections hold the same attributes, symbol indices aside,
    and how many of them differ only in their symbol index."""
    ours, theirs = attributes(reference), attributes(port)
    if len(ours) != len(theirs):
        return False, 0
    symbol_only = 0
    for (form_a, attr_a, data_a), (form_b, attr_b, data_b) in zip(ours, theirs, strict=True):
        if (form_a, attr_a) != (form_b, attr_b) or len(data_a) != len(data_b):
            return False, 0
        if data_a != data_b:
            if len(data_a) < 4 or data_a[4:] != data_b[4:]:
                return False, 0
            symbol_only += 1
    return True, symbol_only


_NAMING = frozenset({".symtab", ".strtab", ".shstrtab"})  # names and indices only


def _differs(ours: Section, theirs: Section, name: str) -> bool:
    if name.startswith(".rela."):  # relocations name symbols by index
        return ours.size != theirs.size
    if name.startswith(".nv.info"):
        return not compare_attributes(ours.data, theirs.data)[0]
    return (ours.data, ours.size, ours.flags) != (theirs.data, theirs.size, theirs.flags)


def compare_cubin_elf(reference: Path, port: Path) -> ElfComparison:
    ours, theirs = read_cubin(reference.read_bytes()), read_cubin(port.read_bytes())
    text = ".text.<kernel>"
    info = ".nv.info.<kernel>"
    same_info, symbol_only = compare_attributes(
        ours.sections.get(info, _ABSENT).data, theirs.sections.get(info, _ABSENT).data
    )
    both = sorted(set(ours.sections) & set(theirs.sections) - _NAMING - {text, info})
    differing = tuple(
        name for name in both if _differs(ours.sections[name], theirs.sections[name], name)
    )
    return ElfComparison(
        text_identical=text in ours.sections
        and ours.sections[text].data == theirs.sections.get(text, _ABSENT).data,
        attributes_identical=same_info,
        symbol_index_only=symbol_only,
        flags=(ours.flags, theirs.flags),
        only_reference=tuple(sorted(set(ours.sections) - set(theirs.sections))),
        only_port=tuple(sorted(set(theirs.sections) - set(ours.sections))),
        differing_sections=differing,
    )
