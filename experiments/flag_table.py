"""The flag table of docs/reference/conventions.md, regenerated from the option
declarations (simulator/options/catalog.py) between its markers.

Run: `python experiments/flag_table.py` rewrites the table; `--check` changes no file
and exits 1 if the page's table differs from the declarations'
(tests/test_options.py runs the check)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simulator.options.table import with_table

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "conventions.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if the page's table is stale")
    args = parser.parse_args(argv)
    page = PAGE.read_text()
    fresh = with_table(page)
    if fresh == page:
        print(f"{PAGE.name}: the flag table is the declarations'")
        return 0
    if args.check:
        print(f"{PAGE}: the flag table differs from simulator/options/catalog.py; run "
              "python experiments/flag_table.py", file=sys.stderr)
        return 1
    PAGE.write_text(fresh)
    print(f"wrote the flag table of {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
