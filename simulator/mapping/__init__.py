"""Tiling plans and the rules about them (DESIGN.md section 1, the mapping wing below
lowering): `plan` (the plan schema and a complete tiling), `footprint` (what a tiling
occupies and moves), `heuristics` (the registry and the shipped heuristics), `windows`
(a convolution's input windows).

This face re-exports what a user's heuristic plugin needs (`from simulator.mapping
import register, Tiling`): the registry, the shipped
heuristics to build on, the plan types."""

from simulator.mapping.footprint import operand_bytes, weight_element_bytes
from simulator.mapping.heuristics import (array_aligned, known_heuristics, min_offchip,
                                          os_k_inner, register)
from simulator.mapping.plan import Mapping, Tiling, TilingSpec

__all__ = ["Mapping", "Tiling", "TilingSpec", "array_aligned", "known_heuristics",
           "min_offchip", "operand_bytes", "os_k_inner", "register",
           "weight_element_bytes"]
