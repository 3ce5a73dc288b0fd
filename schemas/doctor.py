"""The preflight report: one check per requirement."""

from __future__ import annotations

from pydantic import BaseModel


class Check(BaseModel):
    name: str
    ok: bool
    optional: bool = False
    version: str | None = None
    path: str | None = None
    note: str | None = None
    fix: str | None = None


class DoctorReport(BaseModel):
    ok: bool
    cuda_toolkit_path: str
    checks: list[Check]

    def missing(self) -> list[Check]:
        return [check for check in self.checks if not check.ok]
