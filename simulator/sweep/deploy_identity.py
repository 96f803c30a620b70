"""What a deployment-search point's outcome depends on, by content (DESIGN.md section
18): the identity every point on one platform shares and each point's key, so a store
of points (simulator.sweep.deploy_store) reuses a point only where nothing it depends
on changed."""

from __future__ import annotations

import json

import simulator
from simulator.inputs.platform import Platform
from simulator.serving.cost_cache import model_identity
from simulator.serving.precision import ServingPrecision
from simulator.serving.spec import ServeSpec
from simulator.serving.arrival_trace import Trace
from simulator.sweep.rows import stored_key


def search_identity(spec: ServeSpec, platform: Platform, config, trace: Trace | None,
                    prune: bool) -> dict:
    """What every point's outcome on one platform depends on besides the deployment:
    the platform, the model and trace by content, the serving spec (SLA included) and
    MODEL_VERSION. Names and paths are left out, so a renamed file keeps its keys."""
    return {"platform": platform.model_dump(mode="json"),
            "model": model_identity(config),
            "trace": trace.source.sha256 if trace is not None else None,
            "spec": spec.model_dump(mode="json", exclude={"arch", "model",
                                                          "arrival_trace"}),
            "prune": prune, "model_version": simulator.MODEL_VERSION}


def point_key(identity: dict, point, plan: ServingPrecision | None = None) -> tuple[str, dict]:
    """A point's (a sweep.deploy.Deployment) key, the sha256 of its canonical inputs,
    and the inputs as stored: a precision plan by its content (`plan`, the point's plan
    read), never its path; a point without one keys as before plans were searched."""
    deployment = {k: v for k, v in point.fields().items()
                  if k not in ("arch", "precision", "precision_file")}
    if plan is not None:
        deployment["precision"] = plan.identity()
    inputs = json.loads(json.dumps({**identity, "deployment": deployment}, default=str))
    return stored_key(inputs), inputs
