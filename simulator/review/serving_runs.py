"""The serving runs of a study (DESIGN.md section 10): every platform x workload or
model of the scope, served through `simulator.serving` at each offered load of
scope.serving, kept as one result file per pair and reused by content hash.

A file holds the serving spec (at the load the SLA is judged at), the offered loads,
and one `accsim serve --json` result per load. A pair the serving simulator refuses
(a platform without the HBM capacity an LLM needs, say) is not evaluated, with the
simulator's own message; the rest of the packet goes on.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, ValidationError

import simulator
from simulator.inputs.platform import PosFloat, Strict
from simulator.errors import AccsimError
from simulator.inputs.loader import decode_text, parse_json, read_bytes
from simulator.output.files import OutputFolder
from simulator.present.results import ServeResult, read_result
from simulator.review.runs import RESULTS_FOLDER, cache_read, cache_write, placed
from simulator.review.study import Loaded, ResolvedStudy, Sla
from simulator.serving.serve import prepare, serve
from simulator.serving.spec import ServeSpec

SLA_METRICS = ("latency", "ttft", "tpot")


class ServingRun(Strict):
    """How a serving result file's points were computed: the spec at each load."""

    spec: ServeSpec
    rates_per_s: list[PosFloat] = Field(min_length=1)


class ServingResultFile(Strict):
    """A serving result file as verify and the packet's sections read it (serve_points
    writes it): each point an `accsim serve --json` result."""

    serving: ServingRun
    points: list[ServeResult]


@dataclass(frozen=True)
class ServingRecord:
    """One platform x subject: its result file, or why it has none."""

    platform: str
    subject: str          # a workload's or a model's label
    llm: bool
    file: str | None
    sha256: str | None
    data: ServingResultFile | None
    reason: str | None    # not evaluated: the serving simulator's refusal
    reused: bool = False  # taken from the cache (said on the terminal only)

    @property
    def name(self) -> str:
        return ".".join(re.sub(r"[^A-Za-z0-9_-]+", "_", part)
                        for part in ("serving", self.platform, self.subject))


def serving_sla(sla: Sla, *, llm: bool) -> dict[str, float]:
    """The study's percentile targets in the serving spec's keys (ttft_p95_ms, ...);
    TTFT and TPOT only for LLMs (a plain request has one output)."""
    keys = {}
    for metric in SLA_METRICS if llm else ("latency",):
        bounds = getattr(sla, f"{metric}_ms")
        for percentile, bound in (bounds.bounds() if bounds else {}).items():
            keys[f"{metric}_{percentile}_ms"] = bound
    return keys


def serve_spec(study: ResolvedStudy, platform: Loaded, subject: str, *,
               llm: bool) -> ServeSpec:
    """The serving spec of one pair at the load the SLA is judged at."""
    load = study.study.scope.serving
    what = {"model": subject} if llm else {"workload": subject}
    if load.arrival == "trace":  # the trace gives each request's tokens
        beside = Path(study.source.path).parent / load.arrival_trace \
            if study.source.path else None
        arrivals = {"arrival_trace": str(beside) if beside and beside.is_file()
                    else load.arrival_trace}
    else:
        arrivals = {"cv": load.cv, "prompt_tokens": load.prompt_tokens,
                    "output_tokens": load.output_tokens}
    try:
        return ServeSpec(arch=platform.source.path, **what, arrival=load.arrival,
                         **arrivals, rate=load.rate_per_s, requests=load.requests,
                         batching=load.batching, memory_tails=True,
                         max_batch=load.max_batch, replicas=load.replicas,
                         seed=load.seed, sla=serving_sla(study.study.sla, llm=llm),
                         fusion=study.fusion, **_system(study))
    except ValidationError as exc:  # a combination the serving simulator refuses
        rule = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise AccsimError(rule, file=study.source.path, field="scope.serving") from None


def _system(study: ResolvedStudy) -> dict:
    """The spec's parallelism fields: each replica a group of the study's system."""
    system = study.study.scope.system
    # overlap none is serve's default, left unset so the spec dumps as before it existed
    return {} if system is None else system.model_dump(
        exclude={"overlap"} if system.overlap == "none" else set())


def serve_points(spec: ServeSpec, rates: list[float]) -> dict:
    """A result file's content: the spec, the loads, one serving result per load."""
    setup = prepare(spec)
    points = [serve(setup, spec.at_rate(rate))[0] for rate in rates]
    return {"serving": {"spec": spec.model_dump(mode="json"), "rates_per_s": rates},
            "points": points}


def _key(spec: ServeSpec, rates: list[float], sources: list[str], code: str) -> str:
    """`sources`: the sha256 of the platform (of its chain of bases, as loaded) and of
    the workload or model file; `code`: simulator.code_version (a serving figure moves
    with the code even where MODEL_VERSION stays)."""
    identity = {"model_version": simulator.MODEL_VERSION, "code": code, "rates": rates,
                "spec": spec.model_dump(mode="json"), "sources": sources}
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _usable(data: bytes | None, spec: ServeSpec, rates: list[float], file: str) -> bool:
    """A cache entry is used only if it holds this spec at these loads."""
    if data is None:
        return False
    try:
        content = parse_json(decode_text(data, file=file).text, file=file)
        return (content["serving"] == {"spec": spec.model_dump(mode="json"),
                                       "rates_per_s": rates}
                and len(content["points"]) == len(rates))
    except (AccsimError, KeyError, TypeError):
        return False


def run_serving(study: ResolvedStudy, subjects: list[tuple[str, str, bool]],
                out: OutputFolder, *, cache: OutputFolder | None, code: str,
                progress: Callable[[int, int, str], None] | None = None,
                check: Callable[[ServeSpec, int], None] | None = None
                ) -> list[ServingRecord]:
    """Serve every platform x (label, workload path or model config, is an LLM);
    `check(spec, loads)` sees each spec the cache does not answer before it is served
    (verify's work bound)."""
    rates = study.study.scope.serving.rates
    pairs = [(p, s) for p in study.platforms for s in subjects]
    records = []
    for index, (platform, (label, path, llm)) in enumerate(pairs):
        record = ServingRecord(platform.label, label, llm, None, None, None, None)
        if progress:
            progress(index, len(pairs), record.name)
        spec = serve_spec(study, platform, path, llm=llm)
        sources = [platform.source.sha256] + (
            [hashlib.sha256(read_bytes(path)).hexdigest()] if Path(path).is_file() else [])
        entry = f"serving-{_key(spec, rates, sources, code)}.json"
        data = cache_read(cache, entry)
        reused = _usable(data, spec, rates, cache.shown(entry) if cache else "")
        if not reused:
            if check:
                check(spec, len(rates))
            try:
                content = serve_points(spec, rates)
            except AccsimError as exc:
                records.append(ServingRecord(platform.label, label, llm, None, None, None,
                                             exc.message()))
                continue
            data = (json.dumps(content, indent=1) + "\n").encode()
            cache_write(cache, entry, data)
        target = f"{RESULTS_FOLDER}/{record.name}.json"
        data = out.write(target, placed(data, out))
        records.append(ServingRecord(platform.label, label, llm, target,
                                     hashlib.sha256(data).hexdigest(),
                                     read_result(json.loads(data), ServingResultFile,
                                                 file=out.shown(target)), None, reused))
    if progress:
        progress(len(pairs), len(pairs), "")
    return records


def rerun(content: dict) -> dict:
    """A serving result file's content computed again from its embedded spec."""
    spec = ServeSpec.model_validate(content["serving"]["spec"])
    return serve_points(spec, content["serving"]["rates_per_s"])
