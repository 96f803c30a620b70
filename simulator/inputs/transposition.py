"""A platform's costs of a GEMM run transposed (DESIGN.md section 19): the operand
orientation mapping choice runs C = A.B as Cᵀ = Bᵀ.Aᵀ, which takes up to two transposes
beyond the exchange of roles; each is free in the array's data path or one pass of the
vector unit per tile (mapping.footprint.transpose_work charges it). An array whose
data path holds only one operand stationary cannot run transposed at all (`supported:
false`): the search leaves the orientation out and a plan that asks for it is refused."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, PositiveInt, model_serializer

from simulator.model.loop_nest import ORIENTATIONS


class Transposition(BaseModel):
    """`systolic_array.transpose`: `stationary_load` (the stationary tile loaded
    transposed: free on the TPU MXU and NeuronCore's TensorE) and `store` (the C tile
    written transposed), each `free` or `vector` (the default: one vector pass at
    cycles_per_element per lane, unset: 1); `supported: false` where the array cannot
    hold the A operand stationary (TPU v1: weights reach it only through the weight
    FIFO). Strict as inputs.platform.Strict, whose module imports this one."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    stationary_load: Literal["free", "vector"] = "vector"
    store: Literal["free", "vector"] = "vector"
    cycles_per_element: PositiveInt | None = None
    supported: bool = True

    @model_serializer(mode="wrap")
    def _dump(self, handler) -> dict:
        data = handler(self)
        if self.supported:   # the default left out: platforms keep their records
            data.pop("supported")
        return data

    @property
    def orientations(self) -> tuple[str, ...]:
        """The operand orientations the array runs, normal first (ties go to it)."""
        return ORIENTATIONS if self.supported else ORIENTATIONS[:1]

    @property
    def pass_cycles(self) -> int:
        """Vector cycles per element per lane of one transpose pass."""
        return self.cycles_per_element or 1
