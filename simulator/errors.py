"""The one error type users see: it names the file, the field and the rule broken."""

from __future__ import annotations


class AccsimError(Exception):
    """Bad input or an impossible request; the CLI prints it on one line and exits 1."""

    def __init__(self, rule: str, *, file: str | None = None, field: str | None = None):
        self.file = file
        self.field = field
        self.rule = rule
        super().__init__(self.message())

    def message(self) -> str:
        where = ": ".join(part for part in (self.file, self.field) if part)
        return f"{where}: {self.rule}" if where else self.rule


class InvalidProgramError(AccsimError):
    """A tile program that breaks a validity rule of DESIGN.md section 3."""


class UnfinishedStepError(AccsimError):
    """An engine ended with steps it could not finish (the program deadlocked)."""
