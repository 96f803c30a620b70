"""The array's output path (DESIGN.md section 15): with `output_path: vector`, every
output tile leaving the accumulators is copied out by the vector unit, so lowering adds
a per-step evacuation-cycles array to the tile program.

Kept apart from the step kernel and the fused epilogue: for a GEMM or conv it is a
function of the loop nest and the releasing steps only, computed on whole arrays;
attention's programs (lowering.attention) charge each of their products one by one
through `product_evacuation`, by the same rule.
"""

from __future__ import annotations

import numpy as np

from simulator.inputs.platform import Platform
from simulator.model.dataflow import stationary_input_elements
from simulator.model.timing import evacuation_cycles


def step_tile_sizes(m: int, n: int, k: int, tm: int, tn: int, tk: int,
                    order: tuple[int, ...], begin: int = 0,
                    length: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ms, ns, ks) of every step in loop order (or of steps begin .. begin + length - 1):
    `order` names the dims outermost first (0 = m, 1 = n, 2 = k), the innermost running
    fastest, as lowering.steps."""
    counts = [-(-m // tm), -(-n // tn), -(-k // tk)]
    end = counts[0] * counts[1] * counts[2] if length is None else begin + length
    rest = np.arange(begin, end, dtype=np.int64)
    index = [None, None, None]
    for dim in reversed(order):
        index[dim] = rest % counts[dim]
        rest = rest // counts[dim]
    return (np.minimum(tm, m - index[0] * tm), np.minimum(tn, n - index[1] * tn),
            np.minimum(tk, k - index[2] * tk))


def evacuation_steps(platform: Platform, m: int, n: int, k: int, tm: int, tn: int,
                     tk: int, order: tuple[int, ...], dataflow: int,
                     release: np.ndarray, begin: int = 0) -> np.ndarray | None:
    """Vector-unit cycles per step copying the output tile out of the accumulators, on
    every releasing step (a finished C tile or spilled partial sums: both leave the
    accumulators); None on a direct output path. With transpose_stationary, the step's
    stationary input tile (ws: its k x n weight tile, is: its m x k input tile; os keeps
    the output stationary, nothing to transpose) passes through the vector unit too.
    `release` may be one block of the program, starting at step `begin`."""
    array = platform.systolic_array
    if array.output_path == "direct":
        return None
    evac = array.evacuation
    ms, ns, ks = step_tile_sizes(m, n, k, tm, tn, tk, order, begin, release.shape[0])
    transposed = np.zeros_like(ms)
    if evac.transpose_stationary:
        transposed = transposed + stationary_input_elements(ms, ns, ks, dataflow)
    cycles = evacuation_array(ms * ns, transposed, evac.elements_per_cycle,
                              evac.tile_cycles)
    return np.where(release, cycles, 0).astype(np.int64)


def evacuation_array(elements: np.ndarray, transposed: np.ndarray, rate: int,
                     tile_cycles: int) -> np.ndarray:
    """timing.evacuation_cycles on whole arrays, its integer arithmetic unchanged (a
    test holds the two equal): a Python call per step would cost seconds on programs
    of millions of steps."""
    return -(-elements // rate) + tile_cycles + -(-transposed // rate)


def product_evacuation(platform: Platform, m: int, n: int, k: int, dataflow: int) -> int:
    """Vector-unit cycles copying one finished m x n product (reduced over k) out of the
    accumulators, with its stationary tile's transpose where the platform has one; 0 on
    a direct output path. The scalar form of evacuation_steps, for programs whose steps
    are products of different shapes."""
    array = platform.systolic_array
    if array.output_path == "direct":
        return 0
    evac = array.evacuation
    transposed = stationary_input_elements(m, n, k, dataflow) if evac.transpose_stationary else 0
    return int(evacuation_cycles(m * n, evac.elements_per_cycle, evac.tile_cycles,
                                 transposed))
