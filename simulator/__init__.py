"""accsim: a cycle-approximate simulator of systolic-array ML accelerators."""

__version__ = "0.1.0"

# Bumped whenever timing or lowering semantics change (DESIGN.md section 6).
# 2: pipelined folds, several arrays, sustained bandwidth, dispatch overhead, partial-sum
# reloads after their spill store, the searched default mapping.
MODEL_VERSION = 2
