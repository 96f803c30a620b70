"""Policies registered by name, so a new arrival process, router, batching rule or
KV allocator is one small class, chosen by name in the spec or on the command line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from simulator.errors import AccsimError

Entry = TypeVar("Entry")


class Registry(Generic[Entry]):
    """Named entries of one kind; an unknown name errors with the known ones."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Entry] = {}

    def register(self, name: str) -> Callable[[Entry], Entry]:
        def add(entry: Entry) -> Entry:
            self._entries[name] = entry
            return entry
        return add

    def names(self) -> list[str]:
        return sorted(self._entries)

    def get(self, name: str, *, field: str | None = None) -> Entry:
        try:
            return self._entries[name]
        except KeyError:
            raise AccsimError(f"unknown {self.kind} {name!r} (known: "
                              f"{', '.join(self.names())})", field=field) from None
