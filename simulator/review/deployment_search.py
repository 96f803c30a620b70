"""The study's deployment search (scope.deployment_search, DESIGN.md section 18) in the
packet: `accsim plan-deployment` over the study's platforms, its points kept in a store
under the run cache (CACHE/deployments/KEY.sqlite, the iteration costs beside it), so a
second review searches nothing again; exported to results/deployment.json, whose
sha256 the packet records like a result file's. `accsim verify` checks that file's
hash and compares it with the search run again (review.packet_verification), within
its bounds (check_verify_bounds)."""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from simulator.errors import AccsimError
from simulator.inputs.loader import dump_json, load_model
from simulator.output.files import OutputFolder
from simulator.precision.precision_plan import PrecisionPlan
from simulator.review.runs import RESULTS_FOLDER
from simulator.review.deployment_scope import DeploymentSearch
from simulator.review.study import ResolvedStudy
from simulator.serving import llm_cost
from simulator.serving.cost_cache import CostCache
from simulator.serving.arrival_trace import load_trace
from simulator.serving.sla import check_sla
from simulator.serving.spec import ServeSpec
from simulator.serving.verification import check_work
from simulator.sweep.deploy import Grid, search_platforms
from simulator.sweep.deploy_axes import (BASELINE, check_cost, colocated_points,
                                         powers_of_two)
from simulator.sweep.deploy_report import all_pruned, conclude
from simulator.sweep.deploy_store import PointStore, cost_folder
from simulator.sweep.store import Store

EXPORT_FORMAT = "accsim-review-deployment"
FILE = f"{RESULTS_FOLDER}/deployment.json"
FOLDER = "deployments"  # inside the run cache
# The points verify searches again without --allow-long: 100x the 9 that the shipped
# deployment study searches (experiments/studies/llama31_8b_deployment_search.yaml: 3
# platforms x 3 T x P splits).
MAX_VERIFY_POINTS = 900


@dataclass(frozen=True)
class DeploymentRecord:
    """The exported search: its file in the packet, the file's sha256, its content."""

    file: str
    sha256: str
    data: dict


def _beside(name: str | None, study: ResolvedStudy) -> str | None:
    """A path relative to the study file, else the name as given (a shipped one)."""
    if name is None:
        return None
    beside = Path(study.source.path).parent / name
    return str(beside) if beside.is_file() else name


def serve_spec(search: DeploymentSearch, study: ResolvedStudy) -> ServeSpec:
    field = "scope.deployment_search"
    raw = {"model": _beside(search.model, study), "prompt_tokens": search.prompt_tokens,
           "output_tokens": search.output_tokens, "requests": search.requests,
           "seed": search.seed, "find_max_rate": True,
           "sla": check_sla(search.sla, field=f"{field}.sla")}
    if search.trace:
        raw |= {"arrival": "trace", "arrival_trace": _beside(search.trace, study)}
    try:
        return ServeSpec.model_validate(raw).resolved()
    except AccsimError as exc:
        raise AccsimError(exc.rule, file=study.source.path,
                          field=f"{field}.{exc.field or 'model'}") from None


def check_search(study: ResolvedStudy) -> None:
    """The search's spec, model, trace and cost tables, checked before any simulation
    of the review (a typo is one error naming the study's field, not a late failure)."""
    search = study.study.scope.deployment_search
    if search is None:
        return
    spec = serve_spec(search, study)
    field = "scope.deployment_search"
    checks = [("model", lambda: llm_cost.load_model(spec.model, dtype=spec.dtype))]
    if spec.arrival == "trace":
        checks.append(("trace", lambda: load_trace(spec.arrival_trace, need_tokens=True)))
    checks += [(f"precision[{index}]", lambda plan=plan: load_model(plan, PrecisionPlan))
               for index, plan in enumerate(precisions(search, study)) if plan is not None]
    for name, load in checks:
        try:
            load()
        except AccsimError as exc:
            raise AccsimError(exc.message(), file=study.source.path,
                              field=f"{field}.{name}") from None
    check_cost([loaded.source.path for loaded in study.platforms if loaded.source],
               search.objective)


def precisions(search: DeploymentSearch, study: ResolvedStudy) -> tuple[str | None, ...]:
    """The precision plans searched, each a path beside the study (None: the model's
    own formats, named `none`), in the study's order without repeats."""
    return tuple(dict.fromkeys(None if name == BASELINE else _beside(name, study)
                               for name in search.precision))


def grid(search: DeploymentSearch, study: ResolvedStudy) -> Grid:
    budget = search.budget_chips
    return Grid(budget, tuple(sorted(set(search.chips_per_replica)))
                or powers_of_two(budget),
                tuple(sorted(set(search.replicas))) or powers_of_two(budget),
                tuple(dict.fromkeys(search.batching)), tuple(sorted(set(search.max_batch))),
                precisions(search, study))


def check_verify_bounds(study: ResolvedStudy, *, allow_long: bool) -> None:
    """Refuse, before anything is searched, a study whose deployment search `accsim
    verify` would run again past its bounds, unless allowed: more than
    MAX_VERIFY_POINTS points, or more than a serving rerun's work bound counting one
    load of the search's requests a point (serving.verification.check_work). Its grid
    is counted, not laid out: a forged study may ask for millions of points."""
    search = study.study.scope.deployment_search
    if search is None or allow_long:
        return
    axes, field = grid(search, study), "scope.deployment_search"
    per_split = len(axes.batching) * len(axes.max_batch) * len(axes.precision)
    points = len(study.platforms) * colocated_points(
        axes.chips_per_replica, axes.replicas, axes.budget_chips, per_split,
        limit=MAX_VERIFY_POINTS)
    if points > MAX_VERIFY_POINTS:
        raise AccsimError(f"searching it again would simulate more than "
                          f"{MAX_VERIFY_POINTS} points, verify's bound (100x the "
                          "shipped deployment study); give --allow-long to search "
                          "them anyway", file=study.source.path, field=field)
    check_work(serve_spec(search, study), loads=points, file=study.source.path,
               field=field, allow_long=False, each="points (one load each at least)")


def run_search(study: ResolvedStudy, out: OutputFolder, *,
               cache: OutputFolder | None, code: str) -> DeploymentRecord:
    """Search every platform of the study (variants as the packet wrote them), write
    the export and return its record; its store is keyed by the code too
    (simulator.code_version)."""
    search = study.study.scope.deployment_search
    spec = serve_spec(search, study)
    archs = [loaded.source.path for loaded in study.platforms]
    check_cost(archs, search.objective)
    # One store per search and platform names (not paths: a packet writes its variants
    # into its own folder), so a second review into another folder reads it back.
    key = hashlib.sha256(json.dumps([search.model_dump(mode="json"),
                                     [loaded.label for loaded in study.platforms], code],
                                    sort_keys=True).encode()).hexdigest()[:16]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) if cache is None else cache.path / FOLDER
        folder.mkdir(exist_ok=True)
        path = folder / f"{key}.sqlite"
        with Store(path) as store:
            points = PointStore(store)
            outcomes = search_platforms(spec, archs, grid(search, study), store=points,
                                        cost_cache=CostCache(cost_folder(path)))
    refused = all_pruned(outcomes)
    if refused is not None:
        raise refused
    found = conclude(outcomes, search.objective, spec.dtype)
    on_front = {row["key"] for row in found["front"]}
    labels = {loaded.source.path: loaded.label for loaded in study.platforms}

    def labelled(row: dict) -> dict:  # the platform by its label (not where its file is)
        return {"platform": labels[row["arch"]],
                **{k: v for k, v in row.items() if k != "arch"}}

    rows = [{**labelled(row), "on_front": row["key"] in on_front}
            for outcome in outcomes for row in outcome.points + outcome.pruned]
    data = {"format": EXPORT_FORMAT, "sla": spec.sla, "objective": search.objective,
            "spec": spec.model_dump(mode="json"), "points": rows,
            "best": {labels[arch]: top and labelled(top)
                     for arch, top in found["best"].items()},
            "front": [row["key"] for row in found["front"]],
            "front_objectives": found["front_objectives"]}
    written = out.write(FILE, dump_json(data, indent=1) + "\n")
    return DeploymentRecord(FILE, hashlib.sha256(written).hexdigest(), data)
