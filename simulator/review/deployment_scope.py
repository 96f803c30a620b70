"""What a study's deployment search asks (scope.deployment_search): `accsim
plan-deployment`'s options as study fields. Read by review.deployment_search, which runs the
search and exports it for the packet."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveFloat

from simulator.inputs.platform import Strict
from simulator.serving.spec import MAX_BATCH, MAX_REQUESTS, MAX_TOKENS
from simulator.sweep.deploy_axes import BASELINE
from simulator.system.parallelism import MAX_CHIPS

# One value of a searched axis, within the bounds plan-deployment's options have.
ChipCount = Annotated[int, Field(ge=1, le=MAX_CHIPS)]
BatchSize = Annotated[int, Field(ge=1, le=MAX_BATCH)]


class DeploymentSearch(Strict):
    """A deployment search over the study's platforms (DESIGN.md section 18, `accsim
    plan-deployment`'s options): each platform's best deployment meeting the SLA, its
    binding constraint, and the front across platforms."""

    model: str = Field(min_length=1, description="config.json (relative to the study) "
                       "or a shipped model name")
    trace: str | None = Field(default=None, min_length=1, description="arrival trace: "
                              "CSV relative to the study, or a shipped name")
    prompt_tokens: int = Field(default=512, ge=1, le=MAX_TOKENS)
    output_tokens: int = Field(default=128, ge=1, le=MAX_TOKENS)
    requests: int = Field(default=1000, ge=1, le=MAX_REQUESTS)
    seed: int = Field(default=0, ge=0)
    sla: dict[str, PositiveFloat] = Field(min_length=1, description="e.g. "
                                          "{ttft_p99_ms: 500, tpot_p99_ms: 50}")
    budget_chips: int = Field(default=8, ge=1, le=MAX_CHIPS)
    chips_per_replica: list[ChipCount] = Field(default=[], description="default: "
                                               "powers of 2 up to the budget")
    replicas: list[ChipCount] = Field(default=[], description="default: powers of 2")
    batching: list[Literal["static", "dynamic", "continuous"]] = ["continuous"]
    max_batch: list[BatchSize] = [16, 64, 256]
    precision: list[str] = Field(
        default=[BASELINE], min_length=1, description="precision plans searched, as "
        f"`plan-deployment --precision` takes them (YAML relative to the study); "
        f"{BASELINE}: the model's own formats")
    objective: Literal["tokens_per_s_per_watt", "tokens_per_s_per_chip",
                       "cost_per_mtok"] = "tokens_per_s_per_watt"
