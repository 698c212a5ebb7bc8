"""A pool's size as the analysis found it, and how (analyze/pools.py finds it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PLAN, SERVER, INFERRED = "plan", "server", "inferred"


@dataclass(frozen=True)
class PoolSize:
    """A pool's slots, how they were found (PLAN, SERVER, INFERRED) and the words for it;
    `most` when only a range is known (`slots` is then its floor)."""

    slots: int
    how: str
    source: str
    most: int | None = None

    def line(self, tier: str) -> str:
        size = f"{self.slots} to {self.most}" if self.most else str(self.slots)
        plural = "s" if self.slots != 1 or self.most else ""
        return f"{tier}'s pool: {size} slot{plural} ({self.source})"

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"slots": self.slots, "found": self.how, "source": self.source}
        if self.most:
            out["most"] = self.most
        return out
