"""accsim: a cycle-approximate simulator of systolic-array ML accelerators."""

__version__ = "0.1.0"

# Bumped whenever timing or lowering semantics change (DESIGN.md section 6).
MODEL_VERSION = 1
