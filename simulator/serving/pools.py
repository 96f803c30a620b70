"""Disaggregated serving's deployment (DESIGN.md section 20), as `accsim serve
--disaggregate` and its spec take it: a prefill pool and a decode pool, each with its
replicas, T x P split and batching limits, and the link the KV cache crosses between
them. Splitwise calls the pools' machines prompt and token machines, DistServe its
prefill and decode instances, each with its own (tp, pp); the keys here are serve's.

`--prefill-pool replicas=2,tp=1,pp=1,max_batch=16,max_tokens=4096` (KEY=VALUE, as
--sla), each key optional: a pool leaves out what the run's own options give."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from simulator.errors import AccsimError
from simulator.inputs.platform import Strict
from simulator.numbers import decimal_int
from simulator.system.parallelism import MAX_CHIPS

ROLES = ("prefill", "decode")
KV_LINKS = ("interconnect", "host")
POOL_KEYS = ("replicas", "tp", "pp", "max_batch", "max_tokens")
MAX_POOL_VALUE = 2**24  # max_tokens' bound (simulator.serving.spec.MAX_TOKENS)


class Pool(Strict):
    """One pool: its replicas, each a T x P group, and its batching limits (None: the
    run's own tp, pp, max_batch and max_tokens)."""

    replicas: int = Field(default=1, ge=1, le=MAX_CHIPS)
    tp: int | None = Field(default=None, ge=1, le=MAX_CHIPS)
    pp: int | None = Field(default=None, ge=1, le=MAX_CHIPS)
    max_batch: int | None = Field(default=None, ge=1, le=2**14)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_POOL_VALUE)


class Disaggregation(Strict):
    """Prefill and decode pools, and the link a request's KV crosses between them:
    the chips' interconnect (point to point, simulator.collectives.cost) or the host
    link (out to host memory and back in, runtime.host_link)."""

    prefill: Pool = Field(default_factory=Pool)
    decode: Pool = Field(default_factory=Pool)
    kv_link: Literal[KV_LINKS] = "interconnect"  # type: ignore[valid-type]


def parse_pool(text: str, flag: str) -> dict:
    """'replicas=2,tp=1' -> {"replicas": 2, "tp": 1}; one clear error naming the flag
    and the key for anything else."""
    pool: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        key, equals, value = part.partition("=")
        key = key.strip()
        if not equals or key not in POOL_KEYS:
            raise AccsimError(f"expected KEY=VALUE with KEY one of {', '.join(POOL_KEYS)}"
                              f", got {part!r}", field=flag)
        if key in pool:
            raise AccsimError(f"{key} given twice", field=flag)
        try:
            pool[key] = decimal_int(value.strip())
        except ValueError:
            raise AccsimError(f"{key} must be a whole number, got {value.strip()!r}",
                              field=flag) from None
    return pool


def pool_plan(spec, role: str) -> tuple[int, int]:
    """(tp, pp) of one pool's replicas: the pool's, else the run's."""
    pool = getattr(spec.disaggregate, role)
    return pool.tp or spec.tp, pool.pp or spec.pp


def pool_spec(spec, role: str):
    """The serving spec of one pool alone: its replicas, split and limits in place of
    the run's, no disaggregation."""
    pool = getattr(spec.disaggregate, role)
    tp, pp = pool_plan(spec, role)
    return spec.model_copy(update={
        "disaggregate": None, "replicas": pool.replicas, "tp": tp, "pp": pp,
        "chips": None, "micro_batches": spec.micro_batches if pp > 1 else None,
        "max_batch": pool.max_batch or spec.max_batch,
        "max_tokens": pool.max_tokens or spec.max_tokens})


def pool_chips(spec) -> int:
    """Chips of both pools."""
    return sum(getattr(spec.disaggregate, role).replicas * tp * pp
               for role in ROLES for tp, pp in [pool_plan(spec, role)])


def disaggregation_rules(spec) -> list[tuple[bool, str, str]]:
    """What a disaggregated spec may not also say: pools serve an LLM's two phases
    under continuous batching, and the pools give the replicas and chips."""
    if spec.disaggregate is None:
        return []
    chips = pool_chips(spec)
    return [
        (spec.model is None, "disaggregate",
         "disaggregated serving splits an LLM's prefill and decode: give a model"),
        (spec.batching not in (None, "continuous"), "disaggregate",
         f"disaggregated pools batch continuously; {spec.batching} batching would be "
         "ignored: drop batching or disaggregate"),
        (spec.replicas != 1, "replicas",
         "with disaggregate each pool gives its replicas (prefill pool replicas=N, "
         "decode pool replicas=N): drop replicas"),
        (spec.chips is not None, "chips",
         "with disaggregate each pool's chips are its tp x pp: drop chips"),
        (chips > MAX_CHIPS, "disaggregate",
         f"the pools hold {chips:,} chips, more than the {MAX_CHIPS:,} a system may "
         "have")]
