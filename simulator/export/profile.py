"""Per-operator times of one model on one chip of a tensor-parallel group: what every
export format is filled from, so they all agree with `accsim run` and `accsim serve`.

The operators are the Hugging Face frontend's (simulator.frontends.hf) for one
continuous-batching iteration of the chip's shard (simulator.system.serving.ShardedFrontend,
collectives in place); each is simulated for one layer (repeat 1) through
simulator.serving.cost.OperatorCosts, so one shape is simulated once per export.
Times are seconds of one chip; the formats convert them to their own units.
"""

from __future__ import annotations

from collections.abc import Callable

from simulator.collectives import collective_cost
from simulator.inputs.platform import DTYPE_BYTES, Platform
from simulator.errors import AccsimError
from simulator.frontends import hf as hf_frontend
from simulator.frontends.hf import ModelConfig
from simulator.serving.cost import OperatorCosts
from simulator.serving.llm_cost import grid_cell
from simulator.system.plan import SystemPlan
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
    (heads over T, an interconnect for T > 1) as `accsim serve --tp` does."""

    def __init__(self, platform: Platform, model: str, *, tp: int = 1,
                 dtype: str | None = None, platform_file: str | None = None):
        self.platform, self.tp, self.dtype = platform, tp, dtype
        self.plan = SystemPlan(chips=tp, tp=tp)
        self.frontend = ShardedFrontend(hf_frontend, self.plan, platform,
                                        platform_file=platform_file)
        self.config: ModelConfig = self.frontend.load_model_config(model)
        self.shard: ModelConfig = shard_config(self.config, self.plan)  # one chip's
        self.costs = OperatorCosts(platform)

    @property
    def act_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype or self.platform.systolic_array.input_dtypes[0]]

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
        a collective is priced by simulator.collectives."""
        if op.kind == "collective":
            return collective_cost(op.collective, op.payload_bytes, op.chips,
                                   self.platform).time_s
        single = op.model_copy(update={"repeat": 1, "inputs": None})
        return self.costs.workload(Workload(name="export", operators=[single])).seconds

    def dense(self, tokens: int) -> dict[str, object]:
        """The operators of an iteration of `tokens` new tokens of one request."""
        return self.operators([(tokens, 0)], ())

    def prefill_attention(self, chunk: int, cached: int):
        """The attention of one prefill chunk after `cached` tokens."""
        return self.operators([(chunk, cached)], ())["attn"]

    def decode_attention(self, batch: int, cached: int):
        """The attention of `batch` decodes, each after `cached` tokens (reading
        cached + 1 keys, the new token's included)."""
        return self.operators((), [cached + 1] * batch)["attn"]

    def all_reduce_seconds(self, payload_bytes: int) -> float:
        """One all-reduce of `payload_bytes` per chip over the T chips."""
        return collective_cost("all_reduce", payload_bytes, self.tp,
                               self.platform).time_s


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
