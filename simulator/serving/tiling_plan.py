"""`accsim serve --mapping PLAN.yaml`: the tiling plan `accsim run --mapping` takes, read
for serving and checked before anything is costed. Serving costs each iteration as a
sum of fusion units (serving.iteration_cost.OperatorCosts), each carrying its operators' merged
entries (by name, by layer_type, the default), so a served iteration is priced as a
run of the same step under the plan."""

from __future__ import annotations

from collections.abc import Collection

from simulator.errors import AccsimError
from simulator.inputs.loader import Source, load_model, locate
from simulator.inputs.named_inputs import warn_unmatched
from simulator.mapping.plan import Mapping, with_fusion, with_heuristic
from simulator.inputs.run_inputs import Inputs
from simulator.serving.spec import ServeSpec
from simulator.simulate import simulate


def serving_plan(spec: ServeSpec) -> tuple[Mapping, Source | None]:
    """The plan iteration costs run under and its file: without --mapping the default
    mapping (spec.mapping()); else the plan, its open fields filled by --heuristic and
    under --fusion (else the plan's own), as `accsim run` reads them."""
    if spec.mapping_plan is None:
        return spec.mapping(), None
    if not spec.system.single_chip:
        raise AccsimError("--mapping applies to single-chip replicas for now",
                          field="--mapping")
    plan, source = load_model(locate(spec.mapping_plan, "mapping"), Mapping)
    return with_fusion(with_heuristic(plan, spec.heuristic), spec.fusion), source


def check_plan(reference: Inputs, names: Collection[str], *, served: str) -> None:
    """Every operator the plan of `reference` names is one of `names` (those every
    served iteration or batch has under that name), and the reference iteration runs
    under it: one error naming the plan's file and field, before anything is served
    (an entry that fails only on other shapes is named so as it is costed); a
    layer_types entry that selects no operator of it is named in a warning."""
    source = reference.mapping_source
    if source is None:
        return
    warn_unmatched(reference)
    for name in reference.mapping.operators:
        if name not in names:
            raise AccsimError(f"no operator {name!r} in an iteration of {served} (it has "
                              f"{', '.join(sorted(names))}; attention, one operator per "
                              "request named by the iteration's requests, is set by "
                              "layer_type)", file=source.path,
                              field=f"operators.{name}")
    simulate(reference)
