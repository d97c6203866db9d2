"""The apps table: filters and server-side paging over the rows. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable
from urllib.parse import urlencode

from velashard.dashboard.rows import AppRow

PAGE_SIZE = 50
UNSCHEDULED = "(unscheduled)"


@dataclass(frozen=True)
class Filters:
    shard: str = ""
    namespace: str = ""
    phase: str = ""
    health: str = ""
    text: str = ""
    page: int = 1

    @classmethod
    def from_args(cls, args: dict[str, str]) -> "Filters":
        try:
            page = max(1, int(args.get("page") or 1))
        except ValueError:
            page = 1
        return cls(*(str(args.get(k) or "").strip()[:253] for k in ("shard", "namespace", "phase", "health", "q")),
                   page=page)

    def query(self, **changes: object) -> str:
        """The query string of these filters with `changes` (for links to other pages)."""
        values = {"shard": self.shard, "namespace": self.namespace, "phase": self.phase, "health": self.health,
                  "q": self.text, "page": self.page, **changes}
        return urlencode({k: v for k, v in values.items() if v and not (k == "page" and v == 1)})


@dataclass(frozen=True)
class Page:
    rows: list[AppRow]
    total: int  # matching rows
    page: int
    pages: int
    shards: list[str]  # choices for the filters, from all rows
    namespaces: list[str]
    phases: list[str]


def matches(row: AppRow, f: Filters) -> bool:
    if f.shard and (row.shard or UNSCHEDULED) != f.shard:
        return False
    if f.namespace and row.namespace != f.namespace:
        return False
    if f.phase and row.phase != f.phase:
        return False
    if f.health and row.health != f.health:
        return False
    return not f.text or f.text.lower() in row.key.lower()


def page_of(rows: Iterable[AppRow], f: Filters, size: int = PAGE_SIZE) -> Page:
    every = list(rows)
    found = sorted((r for r in every if matches(r, f)), key=lambda r: (r.namespace, r.name))
    pages = max(1, -(-len(found) // size))
    page = min(f.page, pages)
    return Page(found[(page - 1) * size:page * size], len(found), page, pages,
                sorted({r.shard or UNSCHEDULED for r in every}), sorted({r.namespace for r in every}),
                sorted({r.phase for r in every if r.phase}))
