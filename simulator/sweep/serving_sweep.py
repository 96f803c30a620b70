"""A serving sweep (DESIGN.md sections 11 and 18): a sweep whose workload is one
serving workload with an SLA. Each sampled point is a platform (the base with the
point's platform fields) and a deployment (system.* and serving.* axes, else serve's
defaults); its SLA capacity and figures come from the deployment search
(simulator.sweep.deploy.search_platform on that one point), pruning included, and it
is kept in the store's deployments table by key, so a sweep resumes as a search does.
The point's platform is written, as data, to a folder beside the store (the search
reads platforms from files); the iteration costs are cached beside it too."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from simulator.output.files import OutputFolder
from simulator.sweep.deploy import Deployment, search_platform
from simulator.sweep.deploy_store import PointStore, cost_folder
from simulator.serving.cost_cache import CostCache
from simulator.sweep.pareto import pareto_mask
from simulator.sweep.jobs import holds, point_values, sampled_rows, system_plan, validated
from simulator.sweep.sweep_spec import SERVING_AXES, Sweep, precision_path, with_values
from simulator.sweep.store import Store
from simulator.system.parallelism import SystemPlan


def platform_folder(store_path: str | Path) -> Path:
    """Where a serving sweep's point platforms go: `s.sqlite` -> `s-platforms/`."""
    path = Path(store_path)
    return path.parent / f"{path.stem}-platforms"


def _platform_file(folder: OutputFolder, root: Path, canonical: dict) -> str:
    text = json.dumps(canonical, sort_keys=True, indent=1) + "\n"
    name = hashlib.sha256(text.encode()).hexdigest()[:16] + ".yaml"
    folder.write(name, text)
    return str(root / name)


def deployment_of(sweep: Sweep, point: dict, arch: str) -> tuple[Deployment, int]:
    """The point's deployment (its axes, else the serving workload's values; a
    precision plan file relative to the sweep file) and the chunk-token budget it runs
    with."""
    spec = sweep.serving
    plan = system_plan(point) or SystemPlan(chips=spec.chips or spec.tp * spec.pp,
                                            tp=spec.tp, pp=spec.pp, ep=spec.ep)
    values = {field: point.get(axis, getattr(spec, field))
              for axis, field in SERVING_AXES.items()}
    if "serving.precision" in point:
        values["precision"] = precision_path(point["serving.precision"],
                                             Path(sweep.file).parent)
    return (Deployment(arch, plan, values["replicas"], values["batching"],
                       values["max_batch"], values["precision"]), values["max_tokens"])


def run_serving_sweep(sweep: Sweep, store_path: str,
                      progress: Callable[[int, int], None] | None = None
                      ) -> tuple[list[dict], int, int]:
    """Every sampled point's row (its axis values under `point`), and how many points
    the store already held and how many this run computed."""
    indices = sampled_rows(sweep)
    root = platform_folder(store_path)
    cache = CostCache(cost_folder(store_path), strict=True)
    rows = []
    with Store(store_path) as store, OutputFolder.plain(root, field="--store") as folder:
        points = PointStore(store)
        for done, index in enumerate(indices):
            point = point_values(sweep, index)
            raw = with_values(sweep.base, point)
            if not all(holds(c, raw, point, sweep.file) for c in sweep.constraints):
                continue
            platform, error = validated(raw)
            if platform is None:
                rows.append({"point": point, "status": "refused", "reason": error})
                continue
            arch = _platform_file(folder, root, platform.model_dump(mode="json"))
            deployment, chunk = deployment_of(sweep, point, arch)
            spec = sweep.serving.model_copy(update={"max_tokens": chunk,
                                                    "precision": None})
            outcome = search_platform(spec, arch, None, cost_cache=cache, store=points,
                                      points=[deployment])
            (row,) = outcome.points + outcome.pruned
            rows.append({**row, "point": point})
            if progress:
                progress(done + 1, len(indices))
    return rows, points.found, points.computed


def serving_front(rows: list[dict], objectives: dict[str, str]) -> list[dict]:
    """The points with every objective no other point beats on all of them."""
    scored = [row for row in rows if all(row.get(name) is not None for name in objectives)]
    if not scored:
        return []
    values = np.array([[row[name] for name in objectives] for row in scored], dtype=float)
    mask = pareto_mask(values, list(objectives.values()))
    return [row for row, on in zip(scored, mask) if on]
