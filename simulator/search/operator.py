"""Searching for the best tiling of one operator (DESIGN.md section 2, Mapping).
Checking a given plan is `simulator.present.plan_check`; the candidate grid and its lower
bounds are `search.bounds`; a whole workload is `search.workload_search`.

Mapper (`map_workload`): per operator, candidate tilings from the array multiples and
divisors of its dims (`mapping.dim_candidates`), every loop order, every dataflow the
platform supports, both operand orientations (DESIGN.md section 19; the plan may fix
one) and depth 1 to 4 (vector operators: rows per tile in steps of an
eighth of a lane pass, and the divisors of its rows, at each depth), plus the
heuristics' own tilings, which are simulated first. It drops what cannot fit, then
walks the rest in order of a lower bound on the objective and stops once the bound
exceeds the best found. The cycle bound is the largest of: the first load's service and
latency + the exact busy cycles (`mapping.array_busy_cycles`; the vector unit's for
vector operators) + the last epilogue and the last store's service and latency; the
compulsory off-chip bytes over the bandwidth; for vector operators, every transfer's
service one after another. The energy bound counts the MACs, vector work, compulsory
off-chip bytes and SRAM traffic no tiling avoids (SRAM reads exactly) plus static power
over the cycle bound. Candidates whose loop orders differ only in dims of one tile give
the same program and are simulated once. The rest are lowered and replayed with the
fast engine (search.evaluation `evaluate`: lower_compute or lower_vector, run_fast,
operator_objectives); candidates that differ only in depth share their lowering
(lower_compute's tables) and its checked arrays.

Ties on the objective go to fewer cycles, then less energy, then the canonical tiling
order (`Tiling.sort_key`); a candidate whose bound merely equals the best is pruned only
when its bounds lose that tie-break. Each operator is searched by one process in a fixed
order and the results are merged in workload order, so the result, and every count
reported, does not depend on the number of worker processes; tests check the pruned
search against an exhaustive one.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, replace

import numpy as np

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.lowering import lower_attention
from simulator.lowering.attention import lowering_choices
from simulator.lowering.attention_bound import cycles_bounds
from simulator.lowering.tile_table import TileTables
from simulator.mapping.footprint import attention_rows
from simulator.mapping.heuristics import attention_base, heuristic_tiling
from simulator.mapping.plan import LOOP_ORDERS, Tiling, TilingSpec
from simulator.model.loop_nest import ORIENTATIONS
from simulator.program.tile_program import MAX_DEPTH, memory_params
from simulator.search.bounds import MAPPER, OPEN, Candidates, candidate_grid, runs_of
from simulator.search.evaluation import Evaluation, evaluate
from simulator.inputs.workload import is_attention, is_compute

OBJECTIVES = ("cycles", "energy", "edp")
# Candidates the walk decides at once between two replays (doubled while none is
# replayed): what it skips costs array operations instead of a Python step each.
WALK_WINDOW = 256


@dataclass(frozen=True)
class SearchStats:
    """What happened to the candidates of one operator."""

    candidates: int = 0     # enumerated: the grid plus the heuristics' tilings
    unfit: int = 0          # a buffer cannot hold `depth` tiles
    duplicates: int = 0     # same program as a candidate earlier in canonical order
    bound_pruned: int = 0   # lower bound above the best found
    simulated: int = 0      # lowered and replayed (heuristics' tilings included)
    invalid: int = 0        # rejected by the lowering for another reason

    def __add__(self, other: SearchStats) -> SearchStats:
        return SearchStats(*(a + b for a, b in zip(astuple(self), astuple(other))))


@dataclass(frozen=True)
class OperatorSearch:
    """The best tiling of one operator and how each heuristic's tiling compares."""

    name: str
    layer_type: str
    kind: str
    runs: int
    best: Evaluation | None
    heuristics: dict[str, Evaluation | str]     # str: why the heuristic's tiling failed
    stats: SearchStats
    same_as: str | None = None     # searched once for an earlier operator of this shape
    fused: tuple[str, ...] = ()    # epilogue members the best tiling runs (fusion auto)
    prologue: tuple[str, ...] = ()  # norms the best tiling applies to its A tiles

    @property
    def vector(self) -> bool:
        return self.kind not in ("gemm", "conv2d", "attention")

    def gap(self, heuristic: str, objective: str) -> float | None:
        """Percent by which the heuristic's objective exceeds the best; None if its
        tiling failed."""
        found = self.heuristics.get(heuristic)
        if not isinstance(found, Evaluation) or self.best is None:
            return None
        best = self.best.objective(objective)
        return 100.0 * (found.objective(objective) / best - 1.0) if best else 0.0


@dataclass(frozen=True)
class SearchTask:
    """One operator's search, as sent to a worker process."""

    op: object
    following: object
    spec: TilingSpec
    platform: Platform
    heuristics: tuple[str, ...]
    objective: str
    exhaustive: bool
    # The default mapping's search: a coarser grid (mapping.coarse_candidates) whose
    # candidates keep the fields the plan fixes, and, beyond the heuristics' tilings,
    # at most max_simulated candidates and max_steps tile steps replayed (None: no
    # limit).
    constrained: bool = False
    max_simulated: int | None = None
    max_steps: int = 0
    # The mapper's search for a norm prologue's consumer (search.prologue): its grid
    # holds only tilings whose A tiles hold whole rows (tk = K).
    whole_rows: bool = False


# Key tiles tried, in eighths of the rule's: smaller key tiles hide more of a short
# decode's first load under compute, larger ones pay fewer per-step costs.
KEY_TILE_STEPS = (1, 2, 4, 8, 16)


def _attention_candidates(op, base: Tiling, spec: TilingSpec,
                          platform: Platform) -> list[Tiling]:
    """An attention operator's candidates: its tiling's query tiles halved, kept and
    doubled, its key tiles from an eighth to twice (within the operator), every dataflow,
    both lowerings, the orientations the array runs and (decode) the vector unit (or the plan's), at the plan's depth and
    groups."""
    rows = attention_rows(op)
    sizes_m = sorted({min(rows, max(1, base.tm * f // 2)) for f in (1, 2, 4)})
    sizes_n = sorted({min(op.kv_len, max(1, base.tn * f // 8)) for f in KEY_TILE_STEPS})
    flows = [spec.dataflow] if spec.dataflow else list(platform.systolic_array.dataflows)
    choices = lowering_choices(op, replace(base, fuse=spec.fuse,
                                           orientation=spec.orientation, unit=spec.unit),
                               platform)
    # Tiling(...) rather than dataclasses.replace(base, ...): the same tilings, made at
    # a third of the cost (a search makes a few dozen).
    return [Tiling(tm=spec.tm or tm, tn=spec.tn or tn, tk=base.tk,
                   loop_order=base.loop_order, dataflow=flow, depth=base.depth, fuse=fuse,
                   heuristic=MAPPER, orientation=orientation, unit=unit,
                   groups=base.groups)
            for tm in sizes_m for tn in sizes_n for flow in flows
            for fuse, orientation, unit in choices]


def _search_attention(task: SearchTask) -> OperatorSearch:
    """Attention's search: every candidate simulated (a few dozen programs of few
    steps); the heuristics all give attention's one tiling rule, both lowerings
    considered by the default's estimate, and never set the best. Equal tilings (the
    heuristics' one, and it again among the candidates) are lowered and replayed once.

    The default mapping's search (`constrained`, by cycles) reads only the best: it
    replays none of the heuristics' tilings, and walks the candidates in order of a
    lower bound on their cycles (lowering.attention_bound.cycles_bound), stopping once
    the bound exceeds the best found, so it finds the best the full walk finds."""
    op, platform, objective = task.op, task.platform, task.objective
    memory = memory_params(platform)
    tables = TileTables(op, platform)   # lowerings and tile products, each made once
    lowerings: dict[tuple, Tiling | AccsimError] = {}   # by sort key: the tiling run
    replays: dict[tuple, Evaluation | AccsimError] = {}

    def once(memo: dict, tiling: Tiling, work):
        key = tiling.sort_key()
        if key not in memo:
            try:
                memo[key] = work(tiling)
            except AccsimError as exc:
                memo[key] = exc
        if isinstance(memo[key], AccsimError):
            raise memo[key]
        return memo[key]

    def replayed(tiling: Tiling) -> Evaluation:
        found = once(replays, tiling,
                     lambda t: evaluate(op, t, platform, memory, None, tables=tables))
        return replace(found, tiling=tiling)

    heuristics: dict[str, Evaluation | str] = {}
    best: Evaluation | None = None
    simulated = invalid = 0
    bounded = task.constrained and not task.exhaustive and objective == "cycles"
    names = () if bounded else task.heuristics
    for name in names:
        try:
            tiling = heuristic_tiling(op, task.spec, platform, name)
            chosen = once(lowerings, tiling,
                          lambda t: lower_attention(op, t, platform,
                                                    tables=tables).tiling)
            found = replayed(replace(chosen, heuristic=tiling.heuristic))
        except AccsimError as exc:
            heuristics[name] = exc.rule
            continue
        heuristics[name] = found
        simulated += 1
    base = attention_base(op, task.spec, platform, MAPPER)
    candidates = _attention_candidates(op, base, task.spec, platform)
    bounds = [0] * len(candidates)
    if bounded:
        bounds = cycles_bounds(op, candidates, platform, tables)
    walk = sorted(range(len(candidates)), key=bounds.__getitem__)   # stable: ties in order
    pruned = 0
    for position, index in enumerate(walk):
        if best is not None and bounds[index] > best.cycles:
            pruned = len(walk) - position   # in bound order: all the rest
            break
        try:
            found = replayed(candidates[index])
        except AccsimError:
            invalid += 1
            continue
        simulated += 1
        if best is None or found.key(objective) < best.key(objective):
            best = found
    stats = SearchStats(len(candidates) + len(names), 0, 0, pruned, simulated, invalid)
    return OperatorSearch(op.name, op.layer_type, op.kind, runs_of(op), best, heuristics,
                          stats)


def _objective_lb(c: Candidates, objective: str) -> np.ndarray:
    if objective == "cycles":
        return c.cycles_lb.astype(np.float64)
    if objective == "energy":
        return c.energy_lb
    return c.energy_lb * c.cycles_lb


def _rank(names: list[str]) -> np.ndarray:
    """Position of each name in sorted order (the canonical order of strings)."""
    return np.argsort(np.argsort(np.array(names)))


def _order_codes(names, reference: str) -> np.ndarray:
    """-1, 0 or 1 per name: how it compares with `reference` as a string."""
    return np.array([(name > reference) - (name < reference) for name in names],
                    dtype=np.int64)


def _greater(columns: list[tuple[np.ndarray, object]], size: int) -> np.ndarray:
    """Per row, whether its tuple of column values compares greater than the tuple of
    the references, as Python orders tuples (the first column that differs decides)."""
    greater, tied = np.zeros(size, dtype=bool), np.ones(size, dtype=bool)
    for values, reference in columns:
        greater |= tied & (values > reference)
        tied &= values == reference
    return greater


@dataclass(frozen=True)
class _Walk:
    """The walk's candidates in walk order: bounds, tile steps and tiling fields."""

    bound: np.ndarray
    cycles: np.ndarray
    energy: np.ndarray
    steps: np.ndarray
    tm: np.ndarray
    tn: np.ndarray
    tk: np.ndarray
    order: np.ndarray
    dataflow: np.ndarray
    depth: np.ndarray
    orientation: np.ndarray

    def matches(self, key: tuple, dataflows: list[str], fuse: str | None,
                rows: slice) -> np.ndarray:
        """Which candidates in `rows` have the tiling sort key `key`."""
        tm, tn, tk, order, flow, depth, fused, orientation = key[:8]  # GEMM: no unit, groups
        flow_code = dataflows.index(flow) if flow in dataflows else -1
        return ((self.tm[rows] == tm) & (self.tn[rows] == tn) & (self.tk[rows] == tk)
                & (self.order[rows] == (LOOP_ORDERS.index(order) if order in LOOP_ORDERS
                                        else -1))
                & (self.dataflow[rows] == flow_code) & (self.depth[rows] == depth)
                & ((fuse or "") == fused)
                & (self.orientation[rows] == ORIENTATIONS.index(orientation)))

    def takes(self, row: int, best: Evaluation | None, objective: str,
              steps_left: int | None, seeds: np.ndarray) -> bool:
        """Whether the walk's window, starting at `row` of an array operator, would
        take that row at once: its bound not above the best's objective, within the
        `steps_left` of the step budget (None: no budget), not a seed's tiling, and
        not losing the tie-break (`best` None: nothing to beat yet). False means
        only that the window decides it."""
        if steps_left is not None and self.steps[row] > steps_left:
            return False
        if seeds[row]:
            return False
        if best is None:
            return True
        # tie_loses's comparison of an array operator's bounds, on one row
        return not ((self.bound[row], self.cycles[row], self.energy[row])
                    > (best.objective(objective), best.cycles, best.energy_pj))

    def tie_loses(self, op, objective: str, best: Evaluation, dataflows: list[str],
                  fuse: str | None, rows: slice) -> np.ndarray:
        """Whether each candidate in `rows`, its objective bound not above the best's,
        still loses the tie-break: its bounds, compared in the order of the tie-break,
        exceed the best's figures. A vector operator's energy is its fixed work plus
        static power over its cycles, so whatever the objective its candidates order
        exactly by (cycles, canonical order), and a cycle bound equal to the best's
        cycles settles it."""
        size = len(self.bound[rows])
        if is_compute(op):
            return _greater([(self.bound[rows], best.objective(objective)),
                             (self.cycles[rows], best.cycles),
                             (self.energy[rows], best.energy_pj)], size)
        key = best.tiling.sort_key()
        fused = fuse or ""
        return _greater([(self.cycles[rows], best.cycles), (self.tm[rows], key[0]),
                         (self.tn[rows], key[1]), (self.tk[rows], key[2]),
                         (_order_codes(LOOP_ORDERS, key[3])[self.order[rows]], 0),
                         (_order_codes(dataflows, key[4])[self.dataflow[rows]], 0),
                         (self.depth[rows], key[5]),
                         ((fused > key[6]) - (fused < key[6]), 0),
                         (_order_codes(ORIENTATIONS, key[7])[self.orientation[rows]], 0)],
                        size)


def _fixed_by_plan(grid: Candidates, spec: TilingSpec, dataflows: list[str], *,
                   vector: bool) -> np.ndarray:
    """Grid candidates that agree with every tiling field the plan sets (depth aside:
    it is checked once candidates are expanded by depth)."""
    keep = np.ones(len(grid), dtype=bool)
    fixed = {"tm": spec.rows_per_tile} if vector else \
        {"tm": spec.tm, "tn": spec.tn, "tk": spec.tk}
    for name, value in fixed.items():
        if value is not None:
            keep &= getattr(grid, name) == value
    if not vector and spec.loop_order is not None:
        keep &= grid.order == LOOP_ORDERS.index(spec.loop_order)
    if not vector and spec.dataflow is not None:
        keep &= grid.dataflow == (dataflows.index(spec.dataflow)
                                  if spec.dataflow in dataflows else -1)
    return keep


def search_operator(task: SearchTask) -> OperatorSearch:
    """The best tiling of one operator (see the module docstring). An array operator
    whose plan leaves its orientation open is searched in each orientation as if the
    plan fixed it, each with its own budget, and the better kept (ties to normal): so
    the normal search is what it was before orientation existed, and a transposed
    tiling is chosen only where it beats it. The default mapping's search (`constrained`,
    not exhaustive) walks a later orientation only up to where its bound passes the
    best an earlier one found: no candidate beyond could beat that, so the better of
    the two is the same (only the counts differ)."""
    if is_attention(task.op):
        return _search_attention(task)
    orientations = task.platform.systolic_array.transpose.orientations
    if is_compute(task.op) and task.spec.orientation is None:
        searches: list[OperatorSearch] = []
        tables = TileTables(task.op, task.platform)   # one tiling's tables serve both
        for orientation in orientations:
            ahead = _better(searches, task.objective).best if searches else None
            limit = ahead.objective(task.objective) if ahead is not None and \
                task.constrained and not task.exhaustive else None
            searches.append(_search_tiles(replace(task, spec=task.spec.model_copy(
                update={"orientation": orientation})), limit, tables))
        return _better(searches, task.objective)
    return _search_tiles(task)


def _better(searches: list[OperatorSearch], objective: str) -> OperatorSearch:
    """One operator's searches in each orientation as one: the best of their bests,
    the heuristics' tilings as the first (normal) search ran them, the counts summed."""
    found = [s.best for s in searches if s.best is not None]
    best = min(found, key=lambda e: e.key(objective)) if found else None
    first = searches[0]
    return replace(first, best=best, stats=sum((s.stats for s in searches[1:]),
                                               first.stats))


def _search_tiles(task: SearchTask, limit: float | None = None,
                  tables: TileTables | None = None) -> OperatorSearch:
    """search_operator's walk over one operator's tilings in the orientations its plan
    leaves open; with a `limit`, only the candidates whose bound is not above it (the
    walk's first part, as it is in bound order). `tables`: the operator's tables from
    its search in another orientation (default: new ones)."""
    op, platform, objective = task.op, task.platform, task.objective
    memory = memory_params(platform)
    heuristics: dict[str, Evaluation | str] = {}
    seen: set[tuple] = set()
    best: Evaluation | None = None
    simulated = invalid = 0

    def consider(evaluation: Evaluation) -> None:
        nonlocal best   # (the heuristic's label is no part of a tiling's key)
        if best is None or evaluation.key(objective) < best.key(objective):
            best = replace(evaluation, tiling=replace(evaluation.tiling, heuristic=MAPPER))

    evaluated: dict[tuple, Evaluation] = {}  # heuristics agreeing on a tiling: one replay
    if tables is None:   # the candidates' per-tile tables, built once each
        tables = TileTables(op, platform)
    for name in task.heuristics:
        try:
            tiling = heuristic_tiling(op, task.spec, platform, name)
            found = evaluated.get(tiling.sort_key())
            if found is None:
                found = evaluate(op, tiling, platform, memory, task.following,
                                 tables=tables)
            else:
                found = replace(found, tiling=tiling)
            evaluated[tiling.sort_key()] = found
        except AccsimError as exc:
            heuristics[name] = exc.rule
            continue
        heuristics[name] = found
        seen.add(found.tiling.sort_key())
        simulated += 1
        consider(found)
    fuse = task.spec.fuse if is_compute(op) else None
    op_dims = (op.gemm().m, op.gemm().n, op.gemm().k) if is_compute(op) \
        else (op.vector().rows,)
    # Both operand orientations (DESIGN.md section 19) unless the plan fixes one.
    orientations = (task.spec.orientation,) if task.spec.orientation else \
        platform.systolic_array.transpose.orientations
    # The default search's grid holds only the tile sizes its plan fixes (its counts
    # are of that grid).
    fixed = (task.spec.tm, task.spec.tn, task.spec.tk) if task.constrained else \
        (None, None, op.gemm().k) if task.whole_rows else OPEN
    grid, dataflows = candidate_grid(op, fuse, task.following, platform,
                                     coarse=task.constrained, orientations=orientations,
                                     fixed=fixed)
    enumerated = len(grid) * MAX_DEPTH
    unfit = int((MAX_DEPTH - grid.max_depth).sum())
    keep = grid.max_depth > 0
    if task.constrained:
        keep &= _fixed_by_plan(grid, task.spec, dataflows, vector=not is_compute(op))
    pruned = 0
    if not task.exhaustive and best is not None:
        # What the heuristics' best already beats: the walk below would stop before it.
        over = _objective_lb(grid, objective) > best.objective(objective)
        pruned = int(grid.max_depth[keep & over].sum())
        keep &= ~over
    grid = grid.select(keep).expand()
    if task.constrained and task.spec.depth is not None:
        grid = grid.select(grid.depth == task.spec.depth)
    order_rank = _rank(list(LOOP_ORDERS))[grid.order]
    flow_rank = _rank(dataflows)[grid.dataflow]
    duplicates = 0
    if not task.exhaustive and len(grid):
        # One program per (tiles, dataflow, depth, orientation, effective loop order):
        # keep the member first in canonical order.
        ranked = np.lexsort((order_rank, grid.effective, grid.orientation, grid.depth,
                             flow_rank, grid.tk, grid.tn, grid.tm))
        keys = np.stack([grid.tm, grid.tn, grid.tk, flow_rank, grid.depth,
                         grid.orientation, grid.effective])[:, ranked]
        first = np.ones(len(grid), dtype=bool)
        first[1:] = (keys[:, 1:] != keys[:, :-1]).any(axis=0)
        unique = np.zeros(len(grid), dtype=bool)
        unique[ranked[first]] = True
        duplicates = int(len(grid) - unique.sum())
        grid = grid.select(unique)
        order_rank, flow_rank = order_rank[unique], flow_rank[unique]
    bound = _objective_lb(grid, objective)
    grid_steps = -(-op_dims[0] // grid.tm) * -(-op_dims[1] // grid.tn) * \
        -(-op_dims[2] // grid.tk) if is_compute(op) else -(-op_dims[0] // grid.tm)
    seeded = simulated
    steps_replayed = 0
    walk = np.lexsort((grid.orientation, grid.depth, flow_rank, order_rank, grid.tk,
                       grid.tn, grid.tm, bound))
    if limit is not None:
        within = int(np.searchsorted(bound[walk], limit, side="right"))
        pruned += len(walk) - within
        walk = walk[:within]
    at = _Walk(bound[walk], grid.cycles_lb[walk], grid.energy_lb[walk], grid_steps[walk],
               grid.tm[walk], grid.tn[walk], grid.tk[walk], grid.order[walk],
               grid.dataflow[walk], grid.depth[walk], grid.orientation[walk])
    # The walk, a window of candidates at a time: until the next replay, the best and
    # the budgets are fixed, so what happens to each candidate before it (skipped for
    # the step budget, already seen, losing the tie-break) and where the walk stops
    # (bound above the best, candidate budget spent) are decided for the whole window.
    # (The grid's tilings are distinct when the platform lists each dataflow once; a
    # repeat is caught as a duplicate when it would be replayed.)
    # The heuristics' tilings among the walk's candidates, found once for the walk.
    seed_rows = np.zeros(len(walk), dtype=bool)
    for key in seen:
        seed_rows |= at.matches(key, dataflows, fuse, slice(0, len(walk)))
    position, window, size = 0, WALK_WINDOW, len(walk)
    array_op = is_compute(op)
    while position < size:
        budget = task.max_simulated is not None
        if budget and simulated - seeded >= task.max_simulated:
            pruned += size - position   # the search's candidate budget is spent
            break
        bounded = not task.exhaustive and best is not None
        if array_op and at.takes(position, best if bounded else None, objective,
                                 task.max_steps - steps_replayed if budget else None,
                                 seed_rows):
            # What the window below decides at once, on the walk's next candidate
            # alone (most replays follow the one before them): the same step, without
            # a window of array operations.
            i = int(walk[position])
            position, window = position + 1, WALK_WINDOW
        else:
            rows = slice(position, min(size, position + window))
            width = rows.stop - rows.start
            stop = np.flatnonzero(at.bound[rows] > best.objective(objective))[:1] \
                if bounded else ()
            stop = int(stop[0]) if len(stop) else width
            skipped = steps_replayed + at.steps[rows] > task.max_steps if budget \
                else np.zeros(width, dtype=bool)
            duplicate = seed_rows[rows] & ~skipped
            lost = at.tie_loses(op, objective, best, dataflows, fuse, rows) & \
                ~skipped & ~duplicate if bounded else np.zeros(width, dtype=bool)
            taken = np.flatnonzero(~(skipped | duplicate | lost)[:stop])[:1]
            passed = int(taken[0]) if len(taken) else stop
            pruned += int(skipped[:passed].sum() + lost[:passed].sum())   # the step budget,
            duplicates += int(duplicate[:passed].sum())                    # or the tie-break
            if not len(taken):
                if stop < width:   # the walk is in bound order: all the rest
                    pruned += size - (rows.start + stop)
                    break
                position, window = rows.stop, 2 * window
                continue
            i = int(walk[rows.start + passed])
            position, window = rows.start + passed + 1, WALK_WINDOW
        tiling = Tiling(tm=int(grid.tm[i]), tn=int(grid.tn[i]), tk=int(grid.tk[i]),
                        loop_order=LOOP_ORDERS[int(grid.order[i])],
                        dataflow=dataflows[int(grid.dataflow[i])],
                        depth=int(grid.depth[i]), fuse=fuse, heuristic=MAPPER,
                        orientation=ORIENTATIONS[int(grid.orientation[i])])
        if tiling.sort_key() in seen:
            duplicates += 1
            continue
        seen.add(tiling.sort_key())
        try:
            found = evaluate(op, tiling, platform, memory, task.following, tables=tables)
        except AccsimError:
            invalid += 1
            continue
        simulated += 1
        steps_replayed += int(grid_steps[i])
        consider(found)
    stats = SearchStats(enumerated + len(task.heuristics), unfit, duplicates, pruned,
                        simulated, invalid)
    return OperatorSearch(op.name, op.layer_type, op.kind, runs_of(op), best, heuristics,
                          stats)


