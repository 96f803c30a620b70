"""Command-line options declared once (issue 40 item 4): `rules` (the rule each value
obeys, shared by the flags and the Python API; it imports only the error type, so the
library functions that check values use it), `declaration` (Option, Use and the
argparse arguments built from them), `catalog` (every shared option), `arguments` (the
API's checks against the catalog) and `table` (the docs' flag table)."""
