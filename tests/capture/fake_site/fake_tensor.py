"""A host-memory tensor with the attributes the recorder reads from torch's."""

from __future__ import annotations


class FakeTensor:
    def __init__(
        self, data: list[int] | list[float] | list[bool], dtype: str, address: int = 4096
    ) -> None:
        self.data = data
        self.dtype = dtype
        self.shape = (len(data),)
        self.address = address
        self.broken = False

    def data_ptr(self) -> int:
        if self.broken:
            raise RuntimeError("no pointer for this one")
        return self.address

    def stride(self) -> tuple[int, ...]:
        return (1,)

    def is_contiguous(self) -> bool:
        return True

    def min(self) -> int:
        return int(min(self.data))

    def max(self) -> int:
        return int(max(self.data))

    def tolist(self) -> list[int] | list[float] | list[bool]:
        return list(self.data)
