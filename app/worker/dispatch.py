"""How a queued conversion reaches the workers: the Dispatcher the API calls, and
the embedded mode's, where the conversions table is the queue."""

from __future__ import annotations

from typing import Protocol


class Dispatcher(Protocol):
    def dispatch(self, conversion_id: str) -> None:
        """Tell the workers a conversion is queued (its row is already committed)."""

    def ping(self) -> None:
        """Raise when the workers cannot be reached (used by /readyz)."""


class TableQueueDispatcher:
    """Embedded mode: the conversions table is the queue and workers poll it."""

    def dispatch(self, conversion_id: str) -> None:
        return None

    def ping(self) -> None:
        return None
