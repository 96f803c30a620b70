"""Counts in words, for the lines accsim prints: "1 operator", "2 operators"."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and the noun, singular for one (`plural`: where adding "s" is wrong)."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"
