"""The array's output path (DESIGN.md section 15): with `output_path: vector`, every
output tile leaving the accumulators is copied out by the vector unit, so lowering adds
a per-step evacuation-cycles array to the tile program.

Kept apart from the step generator and the fused epilogue: for a GEMM or conv it is a
function of the output tile's shape only, worked out per tile shape on whole arrays
(lowering.nest) and charged on every releasing step; attention's programs
(lowering.attention) charge each of their products one by one through
`product_evacuation`, by the same rule.
"""

from __future__ import annotations

import numpy as np

from simulator.inputs.platform import Platform
from simulator.model.dataflow import stationary_input_elements
from simulator.model.timing import evacuation_cycles


def evacuation_array(elements: np.ndarray, transposed: np.ndarray, rate: int,
                     tile_cycles: int) -> np.ndarray:
    """timing.evacuation_cycles on whole arrays, its integer arithmetic unchanged (a
    test holds the two equal): a Python call per step would cost seconds on programs
    of millions of steps."""
    return -(-elements // rate) + tile_cycles + -(-transposed // rate)


def product_evacuation(platform: Platform, m: int, n: int, k: int, dataflow: int) -> int:
    """Vector-unit cycles copying one finished m x n product (reduced over k) out of the
    accumulators, with its stationary tile's transpose where the platform has one; 0 on
    a direct output path. The scalar form of evacuation_array, for programs whose steps
    are products of different shapes."""
    array = platform.systolic_array
    if array.output_path == "direct":
        return 0
    evac = array.evacuation
    transposed = stationary_input_elements(m, n, k, dataflow) if evac.transpose_stationary else 0
    return int(evacuation_cycles(m * n, evac.elements_per_cycle, evac.tile_cycles,
                                 transposed))
