"""accsim: a cycle-approximate simulator of systolic-array ML accelerators."""

__version__ = "0.1.0"

# Bumped whenever timing or lowering semantics change (DESIGN.md section 6).
# 2: pipelined folds, several arrays, sustained bandwidth, dispatch overhead, partial-sum
# reloads after their spill store, the searched default mapping.
# 3: tensor parallelism of plain workloads follows the activation's layout (all-gathers
# before column-parallel operators fed a split input; heads and groups split in place).
# 4: the fusion planner is the default (--fusion auto, DESIGN.md section 15): vector
# operators run as GEMM/conv epilogues or fused vector kernels, in runs, serving and the
# mapper alike; --fusion none keeps 3's figures.
# 5: a norm read only by GEMMs runs as their prologue (DESIGN.md section 15 c) under
# --fusion auto; none and epilogue keep 4's figures.
# 6: operand orientation is a mapping choice (DESIGN.md section 19): the default search
# weighs every GEMM run transposed (--orientation auto); --orientation normal keeps 5's
# figures. Attention as kernels run it: either orientation, decode on the vector unit,
# K/V head groups chained in one program, MLA's one latent read (`orientation: normal,
# unit: array, groups: 1` keeps 5's attention figures).
MODEL_VERSION = 6
