"""`accsim verify RESULT`: tell what kind of result a file holds and verify it with the
checks of that kind. A review packet is checked file by file (review.packet_verification), a
serve result is served again (serving.verification), a comparison platform by platform
(verification.compared), and a run result is rerun from
its embedded inputs (simulator.verification.rerun) - read as `accsim run` reads SCALE-Sim files,
with a validation run's platform made again, and a multi-chip result's workload
sharded again and its `system` block recomputed."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from simulator.output import progress
from simulator.inputs.anchors import anchored
from simulator.frontends import scalesim
from simulator.errors import AccsimError
from simulator.frontends.hf.llm_figures import simulated_figures
from simulator.inputs.loader import dump_json, read_json, refuse_empty_name
from simulator.options.catalog import add_options
from simulator.review.deployment_search import MAX_VERIFY_POINTS
from simulator.review.packet_verification import verify_packet
from simulator.review.runs import default_cache_dir
from simulator.serving.verification import (MAX_VERIFY_WORK, serving_kind,
                                            verify_serving)
from simulator.system.parallelism import SystemPlan
from simulator.system.sharded_run import rerun_figures
from simulator.system.shard import shard_plain
from simulator.output.terminal import echo, plain
from simulator.verification.compared import (MAX_VERIFY_COMPARED, compared_results,
                                             verify_compared)
from simulator.verification.rerun import RunKind, Verification, embedded_models, read_input, verify_run

# Differences printed before the rest are counted.
SHOWN_DIFFERENCES = 20


def verify(path: str, *, allow_long: bool = False, cache: str | None = None,
           no_cache: bool = False) -> Verification:
    """Check a result file of any kind accsim writes (a serving rerun over verify's
    work bound refused unless `allow_long`; a packet's study reviewed again reading
    the run cache `cache`, none with `no_cache`, as `accsim review` takes them)."""
    recorded, _ = read_json(path)
    if isinstance(recorded, dict) and isinstance(recorded.get("packet"), dict):
        return verify_packet(path, recorded, verify_file=verify, allow_long=allow_long,
                             cache=cache, no_cache=no_cache)
    # the paths it records are relative to its folder, not to the working directory
    recorded = anchored(recorded, Path(path).parent)
    if serving_kind(recorded):  # what `accsim serve --json` wrote
        return verify_serving(path, recorded, allow_long=allow_long)
    compared = compared_results(recorded)
    if compared is not None:  # what `accsim compare --json` wrote
        return verify_compared(path, compared, allow_long=allow_long, run_kind=run_kind)
    models = embedded_models(recorded, file=path)
    return verify_run(path, recorded, models, run_kind(path, recorded, models))


def _reread(kind: str, path: str):
    """The model a source file gives today, read as `accsim run` reads it."""
    if kind == "platform" and scalesim.is_scalesim_config(path):
        return scalesim.load_config(path)[0]
    if kind == "workload" and scalesim.is_scalesim_topology(path):
        return scalesim.load_topology(path)[0]
    return read_input(kind, path)


def run_kind(path: str, recorded: dict, models: dict) -> RunKind:
    """How this run result is checked: a SCALE-Sim validation run made its platform
    and plan itself; a multi-chip run simulated one chip's shard of its workload file
    and recorded a `system` block beside the result; a run given a precision plan
    simulated the workload with the plan's formats (the embedded one, not its file's)
    and its `precision` block, what the plan chose, is taken as recorded."""
    validate = models["mapping"].name == scalesim.VALIDATE_MAPPING_NAME
    system = recorded.get("system") if isinstance(recorded.get("system"), dict) else None

    def as_run(reread: dict) -> dict:
        if validate and {"platform", "workload"} <= set(reread):
            reread["platform"] = scalesim.validate_platform(reread["platform"],
                                                            reread["workload"])
        if system is not None and "workload" in reread:
            reread["workload"] = _shard_of(reread["workload"], system, models)
        return reread

    def extra(result) -> dict:
        blocks = {}
        for key, rerun in (("system", rerun_figures), ("llm", rerun_llm),
                           ("capacity", lambda block, _: block),
                           ("precision", lambda block, _: block)):
            if recorded.get(key) is None:
                continue
            try:
                blocks[key] = rerun(recorded[key], result)
            except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
                raise AccsimError(f"not an accsim {key} block ({type(exc).__name__}: "
                                  f"{exc})", file=path, field=key) from None
        return blocks

    return RunKind(reread=_reread, as_run=as_run,
                   made_by_run=frozenset({"mapping"} if validate else ())
                   | ({"workload"} if recorded.get("precision") is not None else set()),
                   extra=extra if any(recorded.get(key) is not None for key in
                                      ("system", "llm", "capacity", "precision"))
                   else None)


def rerun_llm(recorded: dict, result) -> dict:
    """A recorded `llm` block on a rerun: the model's sizes as recorded (they come from
    the config, which the result does not embed), every simulated figure recomputed.
    The capacity stamp is taken as recorded for the same reason."""
    per_request = recorded["length"] if recorded["phase"] == "prefill" else 1
    if not isinstance(per_request, int) or per_request < 1:
        raise ValueError(f"length {per_request!r}")
    figures = simulated_figures(result, tokens=recorded["tokens"],
                                per_request=per_request)
    return json.loads(dump_json({**recorded, **figures}))


def _shard_of(workload, system: dict, models: dict):
    """One chip's shard of a plain workload under a recorded `system` block's plan, as
    the run built it (simulator.system.shard); the workload itself where the block is
    not a plan."""
    try:
        plan = SystemPlan(**{key: system[key] for key in ("chips", "tp", "pp", "ep")},
                          overlap=system.get("overlap", "none"))  # older files: none
        return shard_plain(workload, plan, models["platform"], row_parallel=frozenset(
            models["mapping"].row_parallel)).workload
    except (KeyError, TypeError, ValueError, AccsimError):
        return workload  # the comparison then reports the edit


def handle(args: argparse.Namespace) -> int:
    refuse_empty_name(args.result, "result file", field="RESULT")
    if args.cache is not None:  # read only for a packet; an empty one is a mistake anyway
        refuse_empty_name(args.cache, "cache folder", field="--cache")
    with progress.status(f"verifying {args.result} (rerunning its inputs)"):
        outcome = verify(args.result, allow_long=args.allow_long, cache=args.cache,
                         no_cache=args.no_cache)
    for change in outcome.changed_sources:
        echo(f"changed input: {plain(change)}")
    if outcome.model_changed:
        echo(f"model version changed: {plain(outcome.model_changed)}")
    shown = outcome.differences if args.all else outcome.differences[:SHOWN_DIFFERENCES]
    for difference in shown:
        echo(f"differs on rerun: {plain(difference)}")
    if len(shown) < len(outcome.differences):
        echo(f"... and {len(outcome.differences) - len(shown)} more differences "
             f"(accsim verify --all {args.result} lists them)")
    if outcome.ok:
        echo(f"{args.result}: verified (inputs unchanged, rerun identical)")
        return 0
    print(f"{args.result}: NOT verified", file=sys.stderr)
    return 1


def add_arguments(verify_cmd: argparse.ArgumentParser) -> None:
    verify_cmd.add_argument("result")
    verify_cmd.add_argument("--all", action="store_true", help="list every difference "
                            f"(default: the first {SHOWN_DIFFERENCES} and a count)")
    verify_cmd.add_argument("--allow-long", action="store_true", help="rerun a serving "
                            "result, a comparison or a packet's deployment search "
                            "however long it takes (default: refuse one over "
                            f"{MAX_VERIFY_WORK:,} requests x tokens, 100x the shipped "
                            f"example, a comparison of over {MAX_VERIFY_COMPARED} "
                            f"platforms, or a search over {MAX_VERIFY_POINTS} points)")
    verify_cmd.add_argument("--cache", metavar="DIR", help="a review packet: the run "
                            "cache its study's second review reads, as accsim review's "
                            f"--cache (default {default_cache_dir()})")
    verify_cmd.add_argument("--no-cache", action="store_true", help="a review packet: "
                            "review its study again from nothing (what a reviewer "
                            "without the cache gets)")
    add_options(verify_cmd, "verify", "inputs")
    verify_cmd.set_defaults(handler=handle)
