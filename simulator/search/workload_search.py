"""The mapper (`accsim map`): every operator of a workload searched (search.operator),
in parallel across operators, merged in workload order, with how each heuristic
compares; the answer as data (MapResult), JSON and a plan that reproduces it. Each
operator is searched by one process in a fixed order, so the result, and every count
reported, does not depend on the number of worker processes."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import simulator
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.inputs.run_inputs import Inputs
from simulator.limits import check_inputs
from simulator.inputs.loader import dump_json, read_json
from simulator.output.files import write_file
from simulator.mapping.heuristics import check_candidates, dim_candidates, heuristic
from simulator.mapping.plan import (LOOP_ORDERS, EpilogueMember, Mapping, Tiling,
                                    TilingSpec, check_mapping_names)
from simulator.program.tile_program import MAX_DEPTH, memory_params
from simulator.search.bounds import runs_of, vector_sizes
from simulator.search.operator import (OBJECTIVES, Evaluation, OperatorSearch, SearchStats,
                                       SearchTask, evaluate, search_operator)
from simulator.search.fusion import fitted_group
from simulator.search.prologue import prologue_refusal, whole_rows
from simulator.search.default import SearchCache
from simulator.search.resolve import placed_operators, resolve_tiling
from simulator.inputs.workload import Conv2d, Gemm, is_attention, is_collective, is_compute

BUILTIN_HEURISTICS = ("array_aligned", "min_offchip", "os_k_inner")


@dataclass(frozen=True)
class MapResult:
    """The mapper's answer for a workload on a platform."""

    platform: str
    workload: str
    mapping: str
    objective: str
    exhaustive: bool
    heuristics: list[str]
    operators: list[OperatorSearch]
    model_version: int = simulator.MODEL_VERSION
    accsim_version: str = simulator.__version__
    fusion: str | None = None      # the plan's fusion mode, carried into plan()

    def operator(self, name: str) -> OperatorSearch | None:
        return next((op for op in self.operators if op.name == name), None)

    @property
    def stats(self) -> SearchStats:
        """Counts summed over the searches made (shared shapes once)."""
        total = SearchStats()
        for op in self.operators:
            if op.same_as is None:
                total = total + op.stats
        return total

    def summary(self) -> list[dict]:
        """Per heuristic: workload totals and gaps to the sum of the per-operator bests."""
        rows = []
        best_cycles = sum(op.best.cycles for op in self.operators if op.best)
        best_energy = sum(op.best.energy_pj for op in self.operators if op.best)
        for name in self.heuristics:
            found = [op.heuristics.get(name) for op in self.operators if op.best]
            ok = [f for f in found if isinstance(f, Evaluation)]
            failed = [op.name for op in self.operators
                      if op.best and not isinstance(op.heuristics.get(name), Evaluation)]
            gaps = [(op.gap(name, self.objective), op.name) for op in self.operators
                    if op.gap(name, self.objective) is not None]
            worst = max(gaps, default=(None, None))
            cycles = sum(f.cycles for f in ok) if not failed else None
            energy = sum(f.energy_pj for f in ok) if not failed else None
            rows.append({
                "heuristic": name,
                "cycles": cycles,
                "cycles_gap_percent": 100 * (cycles / best_cycles - 1)
                if cycles is not None and best_cycles else None,
                "energy_pj": energy,
                "energy_gap_percent": 100 * (energy / best_energy - 1)
                if energy is not None and best_energy else None,
                "operators_at_best": sum(1 for g, _ in gaps if g <= 1e-9),
                "mean_operator_gap_percent": sum(g for g, _ in gaps) / len(gaps)
                if gaps else None,
                "worst_operator": worst[1],
                "worst_operator_gap_percent": worst[0],
                "not_fitting": failed,
            })
        return rows

    def best_totals(self) -> tuple[int, float]:
        """(cycles, energy pJ) of the per-operator bests, summed over the workload."""
        return (sum(op.best.cycles for op in self.operators if op.best),
                sum(op.best.energy_pj for op in self.operators if op.best))

    def as_dict(self) -> dict:
        """Deterministic content: no wall-clock figure, no worker count."""
        cycles, energy = self.best_totals()
        return {
            "kind": "accsim.map",
            "accsim_version": self.accsim_version,
            "model_version": self.model_version,
            "platform": self.platform, "workload": self.workload, "mapping": self.mapping,
            "objective": self.objective, "exhaustive": self.exhaustive,
            "heuristics": self.heuristics,
            "best": {"cycles": cycles, "energy_pj": energy},
            "summary": self.summary(),
            "search": asdict(self.stats),
            "operators": [{
                "name": op.name, "layer_type": op.layer_type, "kind": op.kind,
                "runs": op.runs, "same_as": op.same_as,
                "best": op.best.as_dict() if op.best else None,
                "heuristics": {name: ({**found.as_dict(),
                                       "gap_percent": op.gap(name, self.objective)}
                                      if isinstance(found, Evaluation)
                                      else {"error": found})
                               for name, found in op.heuristics.items()},
                "search": asdict(op.stats),
            } | ({"fused": list(op.fused)} if op.fused else {})
              | ({"prologue": list(op.prologue)} if op.prologue else {})
                for op in self.operators],
        } | ({"fusion": self.fusion} if self.fusion else {})

    @classmethod
    def from_dict(cls, data: dict, *, file: str | None = None) -> MapResult:
        """Read a mapper result written by `accsim map --json`."""
        try:
            if data.get("kind") != "accsim.map":
                raise ValueError("kind is not accsim.map")
            operators = []
            for op in data["operators"]:
                heuristics = {name: (Evaluation.from_dict(found) if "error" not in found
                                     else found["error"])
                              for name, found in op["heuristics"].items()}
                operators.append(OperatorSearch(
                    name=op["name"], layer_type=op["layer_type"], kind=op["kind"],
                    runs=int(op["runs"]),
                    best=Evaluation.from_dict(op["best"]) if op["best"] else None,
                    heuristics=heuristics, stats=SearchStats(**op["search"]),
                    same_as=op.get("same_as"), fused=tuple(op.get("fused", ())),
                    prologue=tuple(op.get("prologue", ()))))
            return cls(data["platform"], data["workload"], data["mapping"],
                       data["objective"], bool(data["exhaustive"]),
                       list(data["heuristics"]), operators, int(data["model_version"]),
                       str(data["accsim_version"]), data.get("fusion"))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise AccsimError(f"not an accsim mapper result ({type(exc).__name__}: "
                              f"{exc})", file=file) from None

    def plan(self) -> Mapping:
        """The best tilings as a plan: `accsim run --mapping` reproduces them (a GEMM
        that runs a norm as its prologue asks for it: `prologue: true`)."""
        operators = {}
        for op in self.operators:
            if op.best is not None:
                spec = op.best.tiling.spec(vector=op.vector,
                                           attention=op.kind == "attention")
                operators[op.name] = spec.model_copy(update={"prologue": True}) \
                    if op.prologue else spec
        return Mapping(name=f"{self.workload}_{self.platform}_best_{self.objective}",
                       operators=operators, fusion=self.fusion)


def _warm(task: SearchTask) -> None:
    """Run the lowering and the fast engine once on a tiny operator, so that the kernels
    are loaded from Numba's cache in this process and inherited by forked workers."""
    tiny = Tiling(1, 1, 1, "mnk", task.platform.systolic_array.dataflows[0], 1)
    memory = memory_params(task.platform)
    for op in (Gemm(name="warm", layer_type="warm", kind="gemm", m=1, n=1, k=1),
               Conv2d(name="warm", layer_type="warm", kind="conv2d", h=1, w=1, cin=1, cout=1,
                    kh=1, kw=1)):
        try:
            evaluate(op, tiny, task.platform, memory, None)
        except AccsimError:
            pass


def _grid_size(op, platform: Platform) -> int:
    """An operator's candidate count (its search's rough cost)."""
    if is_attention(op):
        return 9 * 2 * len(platform.systolic_array.dataflows)
    if not is_compute(op):
        return len(vector_sizes(op, platform)) * MAX_DEPTH
    array = platform.systolic_array
    g = op.gemm()
    units = (array.rows, array.cols)
    return (len(dim_candidates(g.m, units)) * len(dim_candidates(g.n, units))
            * len(dim_candidates(g.k, units)) * len(LOOP_ORDERS) * len(array.dataflows)
            * MAX_DEPTH)


def _shape_key(op, spec: TilingSpec) -> str | None:
    """Operators equal in everything but name and layer_type share a search; None for
    those that fuse (the fused operator's name is part of the tiling)."""
    if spec.fuse is not None:
        return None
    fields = op.model_dump(mode="json", exclude={"name", "layer_type"})
    return json.dumps([fields, spec.model_dump(mode="json", exclude_none=True)],
                      sort_keys=True)


def default_workers() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


Progress = Callable[[int, int, str, int], None]   # (done, total, operator, candidates)


def map_workload(inputs: Inputs, *, objective: str = "cycles",
                 heuristics: list[str] | None = None, workers: int | None = None,
                 exhaustive: bool = False, reuse_shapes: bool = True,
                 progress: Progress | None = None) -> MapResult:
    """Search every operator of the workload (operators absorbed by a plan's `fuse`
    excepted), in parallel across operators, and merge in workload order. Under the
    fusion planner a producer is reported as the group a run makes of it, and the
    members its best tiling gives back are searched on their own (_fused_search); a
    norm that could run as a prologue is weighed both ways (_prologue_group)."""
    if objective not in OBJECTIVES:
        raise AccsimError(f"unknown objective {objective!r} (one of "
                          f"{', '.join(OBJECTIVES)})", field="objective")
    platform, workload, mapping = inputs.platform, inputs.workload, inputs.mapping
    mapping_file = inputs.mapping_source.path if inputs.mapping_source else None
    check_mapping_names(mapping, workload, file=mapping_file)
    workload_file = inputs.workload_source.path if inputs.workload_source else None
    check_inputs(workload, platform, workload_source=workload_file,
                 platform_source=inputs.platform_source.path if inputs.platform_source
                 else None)
    for op in workload.operators:
        try:
            check_candidates(_grid_size(op, platform) // MAX_DEPTH, op, "the mapper")
        except AccsimError as exc:
            raise AccsimError(exc.rule, file=workload_file, field=exc.field) from None
    names = list(dict.fromkeys(heuristics if heuristics else BUILTIN_HEURISTICS))
    for name in names:
        heuristic(name)  # an unknown name errors here, naming the known ones
    tasks: list[SearchTask] = []
    owners: list[int] = []          # per operator: the task it takes its result from
    shapes: dict[str, int] = {}
    ops = workload.operators
    order: list[int] = []
    members: dict[int, tuple[EpilogueMember, ...]] = {}   # producer index -> planned
    absorbed: dict[str, tuple[int, TilingSpec]] = {}      # member name -> (index, entry)
    prologues: dict[int, tuple[int, ...]] = {}   # norm index -> its consumers' indices
    whole: dict[int, int] = {}   # consumer index -> its whole-rows search's task
    walk = list(placed_operators(workload, mapping))
    index_of = {placed.op.name: index for index, placed in enumerate(walk)}

    def task_of(op, spec: TilingSpec, following, whole_rows: bool = False) -> SearchTask:
        return SearchTask(op=op, following=following, spec=spec, platform=platform,
                          heuristics=tuple(names), objective=objective,
                          exhaustive=exhaustive, whole_rows=whole_rows)

    for index, placed in enumerate(walk):
        op, spec, following = placed.op, placed.spec, placed.following
        if placed.members:
            members[index] = placed.members
        if placed.prologue_of:
            prologues[index] = tuple(index_of[name] for name in placed.prologue_of)
        if placed.absorbed_by is not None:
            absorbed[op.name] = (index, spec)
        if placed.absorbed_by is not None or is_collective(op):  # these take no tiling
            continue
        if placed.error is not None:
            raise AccsimError(placed.error, file=mapping_file, field=f"operators.{op.name}")
        key = _shape_key(op, spec) if reuse_shapes else None
        order.append(index)
        if key is not None and key in shapes:
            owners.append(shapes[key])
            continue
        tasks.append(task_of(op, spec, following))
        owners.append(len(tasks) - 1)
        if key is not None:
            shapes[key] = len(tasks) - 1
    for consumer in {c for consumers in prologues.values() for c in consumers}:
        placed = walk[consumer]
        tasks.append(task_of(placed.op, whole_rows(placed.spec, placed.op),
                             placed.following, whole_rows=True))
        whole[consumer] = len(tasks) - 1
    results: list[OperatorSearch | None] = [None] * len(tasks)
    searches = SearchCache()    # the default mapping's tilings, weighed beside the best
    workers = default_workers() if workers is None else max(1, workers)
    _run_tasks(tasks, results, workers, platform, progress)
    found: dict[int, OperatorSearch] = {}
    dropped: dict[int, tuple[str, ...]] = {}   # producer -> members its tiling gives back
    for index, owner in zip(order, owners):
        found[index], dropped[index] = _named(results[owner], ops[index]), ()
        if index in members:
            placed = walk[index]
            found[index], dropped[index] = _fused_search(
                found[index], ops[index], members[index], platform, objective,
                _default_tiling(placed.op, placed.spec, platform, placed.following,
                                searches))
    grouped: set[int] = set()   # norms run as their consumers' prologue
    _search_given_back(found, dropped, absorbed, ops, task_of, grouped)
    for norm, consumers in prologues.items():
        if norm not in found:   # an epilogue keeps it
            continue
        group = _prologue_group(found, norm, consumers, {
            c: (_named(results[whole[c]], ops[c]), _default_tiling(
                ops[c], whole_rows(walk[c].spec, ops[c]), platform, None, searches))
            for c in consumers}, ops, members, platform, objective,
            all(walk[c].spec.prologue for c in consumers))
        if group is not None:
            del found[norm]
            grouped.add(norm)
            for consumer, (search, given_back) in group.items():
                found[consumer], dropped[consumer] = search, given_back
    _search_given_back(found, dropped, absorbed, ops, task_of, grouped)
    return MapResult(platform.name, workload.name, mapping.name, objective, exhaustive,
                     names, [found[index] for index in sorted(found)],
                     fusion=mapping.fusion)


def _named(found: OperatorSearch, op) -> OperatorSearch:
    """A search made for an operator of the same shape, reported under `op`'s name."""
    if found.name == op.name:
        return found
    return replace(found, name=op.name, layer_type=op.layer_type, runs=runs_of(op),
                   same_as=found.name)


def _search_given_back(found: dict[int, OperatorSearch],
                       dropped: dict[int, tuple[str, ...]],
                       absorbed: dict[str, tuple[int, TilingSpec]], ops: list,
                       task_of: Callable[..., SearchTask], grouped: set[int]) -> None:
    """Search on their own the planner members their producer's best tiling gives back
    (unless a prologue group took them: `grouped`), and drop those it keeps (a prologue
    group's tiling may keep a member the consumer's own tiling gave back)."""
    given_back = {absorbed[name][0] for names in dropped.values() for name in names}
    planned = {index for index, _ in absorbed.values()}
    for index in [i for i in found if i in planned and i not in given_back]:
        del found[index]
    new = sorted(given_back - set(found) - grouped)
    tasks = [task_of(ops[index], absorbed[ops[index].name][1], None) for index in new]
    results: list[OperatorSearch | None] = [None] * len(tasks)
    _run_tasks(tasks, results, 1, None, None)
    found.update(zip(new, results))


def _prologue_group(found: dict[int, OperatorSearch], norm: int, consumers: tuple[int, ...],
                    whole: dict[int, tuple[OperatorSearch, Tiling | None]], ops: list,
                    members: dict[int, tuple[EpilogueMember, ...]], platform: Platform,
                    objective: str, asked: bool) -> dict[int, tuple] | None:
    """The norm run as its consumers' prologue (search.prologue): each consumer at its
    best tiling with whole rows per A tile or at the default mapping's (`whole`: the
    search with tk = K and that tiling), whichever group is better by the objective,
    evaluated with the norm and the epilogue its tiling keeps, as a run forms the group.
    Per consumer, its search so reported and the members it gives back; None where a
    consumer's tiling cannot take the prologue, or the group loses by the objective to
    the norm alone plus the consumers at their own best tilings (resolve weighs the same
    by cycles). `asked`: the plan asks for the prologue, so no comparison. The norm's
    heuristics are folded into the first consumer's, so each heuristic's totals stay
    the sum over its operators."""
    memory = memory_params(platform)
    prologue = EpilogueMember(ops[norm], prologue=True)
    group: dict[int, tuple] = {}
    for position, consumer in enumerate(consumers):
        op, (search, default), own = ops[consumer], whole[consumer], found[consumer]
        if search.best is None or own.best is None:
            return None
        options = []
        for tiling in _tilings(search.best, default):
            if prologue_refusal(op, tiling, platform) is not None:
                continue
            kept, given_back = fitted_group(op, tiling, members[consumer], platform) \
                if consumer in members else ((), ())
            options.append((evaluate(op, tiling, platform, memory, None,
                                     fused=(prologue, *kept)), kept, given_back))
        if not options:
            return None
        best, kept, given_back = min(options, key=lambda option: option[0].key(objective))
        heuristics = own.heuristics if position else {
            name: _summed(found[norm].heuristics[name], evaluation)
            for name, evaluation in own.heuristics.items()}
        group[consumer] = (replace(own, best=best, heuristics=heuristics,
                                   stats=own.stats + search.stats,
                                   fused=tuple(m.op.name for m in kept),
                                   prologue=(ops[norm].name,)),
                           tuple(d.name for d in given_back))
    if asked:
        return group
    alone = [found[norm].best] + [found[c].best for c in consumers]
    fused = [search.best for search, _ in group.values()]
    return group if _objective(fused, objective) <= _objective(alone, objective) \
        else None


def _summed(norm: Evaluation | str, consumer: Evaluation | str) -> Evaluation | str:
    """A heuristic's norm and consumer as one unit (an error: the first one's)."""
    if not isinstance(norm, Evaluation):
        return norm
    if not isinstance(consumer, Evaluation):
        return consumer
    return replace(consumer, cycles=consumer.cycles + norm.cycles,
                   energy_pj=consumer.energy_pj + norm.energy_pj)


def _objective(evaluations: list[Evaluation], objective: str) -> float:
    """The objective of operators run one after another (their cycles and energy
    summed)."""
    cycles = sum(e.cycles for e in evaluations)
    energy = sum(e.energy_pj for e in evaluations)
    return {"cycles": float(cycles), "energy": energy, "edp": energy * cycles}[objective]


def _fused_search(found: OperatorSearch, op, planned: tuple[EpilogueMember, ...],
                  platform: Platform, objective: str,
                  default: Tiling | None) -> tuple[OperatorSearch, tuple[str, ...]]:
    """A producer's search re-totalled as the group a run makes of it (fusion auto):
    its tilings are ranked unfused, as the default mapping's search ranks them, and each
    (the best and every heuristic's) is evaluated with the members its tiling keeps.
    The group at the default mapping's tiling (`default`) is weighed too, by the
    objective: a tiling best unfused may keep fewer members or run a slower epilogue, and
    the plan must not lose to the default run. Also the members the chosen tiling gives
    back (they are searched on their own)."""
    memory = memory_params(platform)

    def grouped(tiling: Tiling) -> tuple[Evaluation, tuple[str, ...]]:
        kept, dropped = fitted_group(op, tiling, planned, platform)
        again = evaluate(op, tiling, platform, memory, None, fused=kept)
        return again, tuple(d.name for d in dropped)

    if found.best is None:
        return found, ()
    best, dropped = min((grouped(tiling) for tiling in _tilings(found.best, default)),
                        key=lambda pair: pair[0].key(objective))
    kept = tuple(m.op.name for m in planned if m.op.name not in dropped)
    heuristics = {name: grouped(e.tiling)[0] if isinstance(e, Evaluation) else e
                  for name, e in found.heuristics.items()}
    return replace(found, best=best, heuristics=heuristics, fused=kept), dropped


def _tilings(best: Evaluation, default: Tiling | None) -> list[Tiling]:
    """The mapper's best tiling, then the default mapping's (labelled as the mapper's:
    the plan names it so) where it differs."""
    if default is None:
        return [best.tiling]
    default = replace(default, heuristic=best.tiling.heuristic)
    return [best.tiling] + ([default] if default != best.tiling else [])


def _default_tiling(op, spec: TilingSpec, platform: Platform, following,
                    searches: SearchCache) -> Tiling | None:
    """The tiling a run without a plan gives the operator (None: it has none)."""
    try:
        return resolve_tiling(op, spec, platform, following=following, searches=searches)
    except AccsimError:
        return None


def _run_tasks(tasks: list[SearchTask], results: list, workers: int, platform: Platform,
               progress: Progress | None) -> None:
    """Search every task into `results` (by task index), in parallel when asked."""
    done = 0

    def finished(task_index: int, found: OperatorSearch) -> None:
        nonlocal done
        results[task_index] = found
        done += 1
        if progress:
            progress(done, len(tasks), found.name, found.stats.candidates)

    if workers == 1 or len(tasks) <= 1:
        if progress:
            progress(0, len(tasks), "", 0)
        for task_index, task in enumerate(tasks):
            finished(task_index, search_operator(task))
    else:
        # Imported here: only a parallel search needs them (~5 ms of every run's start).
        from concurrent.futures import ProcessPoolExecutor, as_completed
        _warm(tasks[0])  # load the compiled kernels once, before the workers fork
        # Largest grids first, so the long searches do not start last.
        schedule = sorted(range(len(tasks)), reverse=True,
                          key=lambda t: (_grid_size(tasks[t].op, platform), -t))
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
            # Submitting starts the workers; only then may a progress bar start its
            # thread (forking a threaded process can deadlock the child).
            futures = {pool.submit(search_operator, tasks[t]): t for t in schedule}
            if progress:
                progress(0, len(tasks), "", 0)
            for future in as_completed(futures):
                finished(futures[future], future.result())



def write_map_json(result: MapResult, path: str) -> None:
    """Write a mapper result (MapResult.as_dict) as JSON; equal inputs, equal bytes."""
    write_file(path, dump_json(result.as_dict(), indent=1) + "\n")


def read_map_json(path: str) -> MapResult:
    """Read a mapper result written by write_map_json (`accsim map --json`)."""
    data, _ = read_json(path)
    if not isinstance(data, dict):
        raise AccsimError("not an accsim mapper result (not a JSON object)", file=path)
    return MapResult.from_dict(data, file=path)

