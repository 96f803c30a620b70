"""The flag table of docs/reference/conventions.md, generated from the declarations
(simulator.options.catalog): one row per `row` the options name, one column per
simulating verb; experiments/flag_table.py writes it into the page and a test checks
the page holds exactly this text."""

from __future__ import annotations

from simulator.options.catalog import DECLARED
from simulator.options.declaration import Option

COLUMNS = ("run", "compare", "map", "sensitivity", "serve", "plan-deployment", "regress")
BEGIN = ("<!-- flag table: generated from simulator/options/catalog.py by "
         "experiments/flag_table.py; edit the declarations, not this table -->")
END = "<!-- end of flag table -->"


def _cell(options: list[Option], verb: str) -> str:
    for option in options:
        if verb in option.uses:
            note = option.uses[verb].note
            return f"yes ({note})" if note else "yes"
    return "-"


def _sweep_cell(options: list[Option]) -> str:
    """The sweep column: a flag of `sweep run`, a field of the spec, or a flag of
    `sweep report`."""
    if any("sweep run" in option.uses for option in options):
        return "yes"
    if any(option.spec for option in options):
        return "spec"
    if any("sweep report" in option.uses for option in options):
        return "`sweep report`"
    return "-"


def flag_table() -> str:
    """The Markdown table, between its markers."""
    rows: dict[str, list[Option]] = {}
    for option in DECLARED:
        if option.row is not None:
            rows.setdefault(option.row, []).append(option)
    lines = [BEGIN, "", "| flag | " + " | ".join(COLUMNS) + " | sweep run |",
             "|---" * (len(COLUMNS) + 2) + "|"]
    for options in rows.values():
        flags = ", ".join(f"`{option.flag}`" for option in options)
        cells = [_cell(options, verb) for verb in COLUMNS] + [_sweep_cell(options)]
        lines.append(f"| {flags} | " + " | ".join(cells) + " |")
    return "\n".join(lines + ["", END])


def with_table(page: str) -> str:
    """`page` with the text between the markers replaced by flag_table()."""
    start, end = page.index(BEGIN), page.index(END) + len(END)
    return page[:start] + flag_table() + page[end:]
