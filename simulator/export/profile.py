"""Per-operator times of one model on one chip of a tensor-parallel group: what every
export format is filled from, so they all agree with `accsim run` and `accsim serve`.

The operators are the Hugging Face frontend's (simulator.frontends.hf) for one
continuous-batching iteration of the chip's shard (simulator.system.serving.ShardedFrontend,
collectives in place). `times` costs one layer of it as `accsim run` and `accsim serve`
do: the default plan's fusion units (a norm run as a GEMM's prologue, an activation or
residual add as its epilogue), each simulated once through
simulator.serving.iteration_cost.OperatorCosts; a unit's time is written on its matrix operators
(shared in proportion to their times alone) and the operators fused into them count
0, so the rows of a layer add up to accsim's layer. Times are seconds of one chip; the formats convert them to their own units.
"""

from __future__ import annotations

from collections.abc import Callable

from simulator.collectives.cost import collective_cost
from simulator.inputs.platform import Platform
from simulator.model.formats import whole_bytes_of
from simulator.errors import AccsimError
from simulator.frontends import hf as hf_frontend
from simulator.frontends.hf import ModelConfig
from simulator.serving.iteration_cost import OperatorCosts
from simulator.serving.llm_cost import grid_cell, load_model
from simulator.system.parallelism import SystemPlan
from simulator.system.serving import ShardedFrontend
from simulator.system.shard import shard_config
from simulator.inputs.workload import Workload

# Largest size an export takes along one axis (tokens, KV cache, batch), the most
# shapes it simulates and the most rows it writes: a run past them is refused up front,
# naming the options that shrink it, rather than running for days or filling the disk.
MAX_LIMIT = 1 << 17
MAX_SHAPES = 20_000
MAX_ROWS = 5_000_000


def grid_points(limit: int, bits: int, *, zero: bool = False) -> list[int]:
    """Numbers up to `limit` with at most `bits` significant bits (every integer below
    2^bits, then 2^(bits-1) per octave; bits 1: the powers of two), `limit` itself,
    and 0 first when `zero`."""
    points, value = ([0] if zero else []), 1
    while value < limit:
        points.append(value)
        value += 1 if value < 1 << bits else 1 << (value.bit_length() - bits)
    return points + [limit]


def interpolated(at: Callable[[int], float], value: int, bits: int) -> float:
    """`at` (defined on grid points) at `value`, linear between the grid points around
    it (simulator.serving.llm_cost.grid_cell); exact at a grid point."""
    low, high = grid_cell(value, bits)
    if low == high:
        return at(low)
    return at(low) + (at(high) - at(low)) * (value - low) / (high - low)


class ModelProfile:
    """Operators and their simulated per-layer seconds on one chip of a T-chip group.
    The model is read (config.json or a shipped name) and the plan checked against it
    (heads over T, an interconnect for T > 1) and its weight formats fitted to the
    platform as `accsim serve --tp` does. `simulated` is called once per iteration
    shape simulated (the export's progress)."""

    def __init__(self, platform: Platform, model: str, *, tp: int = 1,
                 dtype: str | None = None, platform_file: str | None = None,
                 simulated: Callable[[], None] = lambda: None):
        self.platform, self.tp, self.dtype = platform, tp, dtype
        self.simulated = simulated
        self.plan = SystemPlan(chips=tp, tp=tp)
        self.frontend = ShardedFrontend(hf_frontend, self.plan, platform,
                                        platform_file=platform_file)
        # its weight formats fitted to the platform's array as `run` and `serve` fit
        # them (an fp8 or mxfp4 checkpoint on a bf16/int8 chip)
        self.config: ModelConfig = load_model(model, dtype=dtype, hf=self.frontend,
                                              platform=platform)[0]
        self.shard: ModelConfig = shard_config(self.config, self.plan)  # one chip's
        self.costs = OperatorCosts(platform)
        self._units: dict[tuple, list] = {}

    @property
    def act_bytes(self) -> int:
        return whole_bytes_of(self.dtype, self.platform.systolic_array.input_dtypes,
                             file=self.frontend.platform_file)

    def iteration(self, prefill, decode) -> Workload:
        """One iteration of the chip's shard, collectives in place (repeat: layers)."""
        return self.frontend.iteration_workload(self.config, prefill=list(prefill),
                                                decode=list(decode),
                                                dtype=self.dtype)

    def operators(self, prefill, decode) -> dict[str, object]:
        """The iteration's operators by name."""
        return {op.name: op for op in self.iteration(prefill, decode).operators}

    def seconds(self, op) -> float:
        """One run of the operator (one layer: its repeat dropped) on one chip;
        a collective is priced by simulator.collectives.cost."""
        if op.kind == "collective":
            return collective_cost(op.collective, op.payload_bytes, op.chips,
                                   self.platform).time_s
        single = op.model_copy(update={"repeat": 1, "inputs": None})
        return self.costs.workload(Workload(name="export", operators=[single])).seconds

    def units(self, prefill, decode) -> list[tuple[list, dict[str, float], float]]:
        """One layer of the iteration (and its head: final norm, LM head) as a run
        fuses it (fused_units, repeats dropped). Memoised per iteration."""
        key = (tuple(prefill), tuple(decode))
        if key not in self._units:
            workload = self.iteration(prefill, decode)
            layer = workload.model_copy(update={"operators": [
                op.model_copy(update={"repeat": 1}) for op in workload.operators]})
            self._units[key] = fused_units(self.costs, layer, self.seconds)
            self.simulated()
        return self._units[key]

    def times(self, prefill, decode) -> dict[str, float]:
        """Seconds of each operator of one layer (and the head) as a run fuses them:
        a carrier's share of its unit, an operator fused into another's 0."""
        out = {}
        for members, shares, seconds in self.units(prefill, decode):
            out |= {op.name: seconds * shares.get(op.name, 0.0) for op in members}
        return out

    def dense(self, tokens: int) -> dict[str, float]:
        """Operator seconds of an iteration of `tokens` new tokens of one request."""
        return self.times([(tokens, 0)], ())

    def prefill_attention(self, chunk: int, cached: int) -> float:
        """The attention of one prefill chunk after `cached` tokens."""
        return self.times([(chunk, cached)], ())["attn"]

    def decode_attention(self, batch: int, context: int) -> float:
        """The attention of `batch` decodes, each with `context` tokens of KV cache, the
        new token's included (`accsim run --phase decode --context`): `context` keys
        read. A format keyed by the cache before the new token asks for K + 1."""
        return self.times((), [context] * batch)["attn"]

    def all_reduce_seconds(self, payload_bytes: int) -> float:
        """One all-reduce of `payload_bytes` per chip over the T chips."""
        return collective_cost("all_reduce", payload_bytes, self.tp,
                               self.platform).time_s

    def send_seconds(self, payload_bytes: int) -> float:
        """One chip sending `payload_bytes` to the next pipeline stage (point to
        point over the interconnect, simulator.collectives.cost)."""
        return collective_cost("point_to_point", payload_bytes, 2, self.platform).time_s


def fused_units(costs: OperatorCosts, workload: Workload, alone: Callable[[object], float]
                ) -> list[tuple[list, dict[str, float], float]]:
    """The workload as a run fuses it, in order: per fusion unit, its operators, each
    carrier's share of it (its GEMMs and attentions, in proportion to their times
    `alone`; a unit without one: its members by theirs) and its seconds. A single
    operator (a collective among them) is its own carrier at its time alone."""
    ops, found = workload.operators, []
    for unit in sorted(costs.units(workload), key=min):
        members = [ops[i] for i in unit]
        if len(unit) == 1:
            found.append((members, {members[0].name: 1.0}, alone(members[0])))
            continue
        carriers = [op for op in members if op.kind in ("gemm", "attention")]
        times = {op.name: alone(op) for op in carriers or members}
        weight = sum(times.values())
        shares = {name: seconds / weight if weight else 1 / len(times)
                  for name, seconds in times.items()}
        found.append((members, shares, costs.workload(workload, units=[unit]).seconds))
    return found


def check_size(shapes: int, rows: int) -> None:
    """Refuse an export that would simulate or write too much (MAX_SHAPES, MAX_ROWS)."""
    if shapes > MAX_SHAPES:
        raise AccsimError(f"would simulate about {shapes:,} operator shapes (at most "
                          f"{MAX_SHAPES:,}): lower --bits, --max-tokens or --max-batch",
                          field="--bits")
    if rows > MAX_ROWS:
        raise AccsimError(f"would write about {rows:,} rows (at most {MAX_ROWS:,}): lower "
                          "--max-tokens or --max-batch, or raise --kv-granularity",
                          field="--max-tokens")


def check_limit(value: int, flag: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise AccsimError(f"must be a whole number from 1 to {MAX_LIMIT}, found {value!r}",
                          field=flag)
    return value
