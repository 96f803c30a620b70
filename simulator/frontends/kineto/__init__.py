"""`accsim import kineto TRACE.json[.gz]`: a PyTorch profiler trace recorded with
shapes as an accsim workload (DESIGN.md section 13).

Each thread's operator events are walked outermost first: an event whose op has a
converter (simulator.frontends.kineto.aten_ops) becomes an operator and what it calls is not
looked at again (a linear that calls addmm counts once); a zero-cost op is counted; any
other op is looked into, and counted as unsupported only when nothing inside it became
an operator. Identical operators (same kind, shape and layer_type) fold into one with
`repeat`, in order of first appearance. Each keeps its measured time as `measured_s`:
the device time of the kernels it launched when the trace has kernels, its CPU time
otherwise; the report shows it beside the simulated time.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from simulator.errors import AccsimError
from simulator.frontends.imported import Imported
from simulator.frontends.kineto.aten_ops import CONVERTERS, MOVES_DATA, SHAPE_ONLY
from simulator.frontends.kineto.trace import BadShapes, Event, NoShapes, Trace, read_trace
from simulator.frontends.shapes import Contradiction
from simulator.frontends.tally import Tally, Unsupported
from simulator.inputs.loader import excerpt
from simulator.inputs.workload import Operator, Workload
from simulator.output.wording import counted

HELP = "a PyTorch profiler (Kineto) trace (.json or .json.gz) recorded with shapes"
OPERATOR = TypeAdapter(Operator)


def import_kineto(path: str, *, strict: bool = False) -> Imported:
    """The workload of a Kineto trace, with notes of what did not become operators."""
    trace = read_trace(path)
    tally = Tally()
    found: list[tuple[dict, float | None, Event]] = []  # fields, measured s, event
    misfits: list[AccsimError] = []  # events whose shapes contradict their op
    on_device = bool(trace.device_us)
    for root in trace.roots:
        _visit(root, trace, tally, found, misfits, on_device)
    if strict:
        tally.refuse_unsupported(trace.file)
    if not found:
        notes = "; ".join(tally.notes()) or "none"
        if misfits:  # the first misfit, and that it left nothing to cost
            raise AccsimError(f"{misfits[0].rule}; no event of the trace could be costed "
                              f"({notes})", file=trace.file, field=misfits[0].field)
        raise AccsimError(f"no operator event of the trace is a supported op ({notes})",
                          file=trace.file)
    operators = _fold(found, trace.file)
    threads = len({event.thread for _, _, event in found})
    stem = Path(path).name.removesuffix(".gz").removesuffix(".json")
    basis = ("device time of the kernels each op launched" if on_device
             else "CPU time of each op (the trace has no device kernels)")
    notes = [f"measured_s: {basis}; {counted(len(found), 'event')} from "
             f"{counted(threads, 'thread')} folded into "
             f"{counted(len(operators), 'operator')}",
             *tally.notes()]
    description = (f"PyTorch profiler trace {Path(path).name}: {len(found)} operator "
                   f"events as {len(operators)} distinct operators (repeat counts the "
                   "identical ones).")
    return Imported(Workload(name=stem, description=description, operators=operators),
                    notes)


def _visit(event: Event, trace: Trace, tally: Tally, found: list, misfits: list,
           on_device: bool) -> bool:
    """Convert an event or what it calls; True if anything became an operator or was
    counted as left out with a reason (so the op that called it is not counted too).
    An event whose recorded shapes contradict its op is left out, its error kept in
    `misfits`."""
    name = event.op
    if name in CONVERTERS:
        try:
            fields = _convert(event, tally)
        except Unsupported as exc:
            tally.leave_out(name, event.where, exc.reason,
                            f"Input Dims {excerpt(event.args.get('Input Dims'))}")
            return True
        except NoShapes:
            raise AccsimError("no recorded shapes (args 'Input Dims'): profile with "
                              "torch.profiler.profile(record_shapes=True)",
                              file=trace.file, field=event.where) from None
        except BadShapes as exc:
            raise AccsimError(str(exc), file=trace.file, field=event.where) from None
        except Contradiction as exc:  # a real trace can hold one (issue 42): counted
            dims = excerpt(event.args.get("Input Dims"))
            tally.leave_out(name, event.where, f"recorded shapes do not fit {name}",
                            f"{exc}; Input Dims {dims}")
            misfits.append(AccsimError(f"recorded shapes do not fit {name} ({exc}): "
                                       f"Input Dims {dims}", file=trace.file,
                                       field=event.where))
            return True
        if on_device:
            device_us = trace.device_time_us(event)
            measured = None if device_us is None else device_us * 1e-6
        else:
            measured = event.dur * 1e-6
        for f in fields:
            found.append(({"layer_type": name.strip("_"), **f}, measured, event))
        return True
    if name in SHAPE_ONLY:
        tally.shape_only[name] += 1
        return False
    if name in MOVES_DATA:
        tally.moves_data[name] += 1
        return False
    inside = [_visit(child, trace, tally, found, misfits, on_device)
              for child in event.children]
    if not any(inside):
        tally.leave_out(name, event.where)
    return any(inside)


def _convert(event: Event, tally: Tally) -> list[dict]:
    """An event's operator fields, each checked against accsim's rules; Unsupported,
    with the reason, for recorded shapes that fit no rule (DESIGN.md section 13):
    an out= variant, a zero-size dimension, fewer inputs than the schema, ..."""
    if event.overload == "out" or event.overload.endswith("_out"):
        raise Unsupported("out= variant: its output among the inputs")
    if any(0 in shape for shape in event.dims
           if all(isinstance(d, int) for d in shape)):
        raise Unsupported("zero-size dimension")
    try:
        fields = CONVERTERS[event.op](event, tally)
    except ZeroDivisionError:
        raise Unsupported("a 0-d tensor where the op needs dimensions") from None
    except IndexError:
        raise Unsupported("fewer recorded inputs or dimensions than the op's "
                          "schema") from None
    except (KeyError, TypeError):
        raise Unsupported("recorded arguments of an unexpected form") from None
    except ValueError as exc:
        if isinstance(exc, Contradiction):
            raise
        raise Unsupported("recorded shapes fit no rule") from None
    for f in fields:
        try:
            OPERATOR.validate_python({"name": "op", "layer_type": "op", **f})
        except ValidationError as exc:
            raise Unsupported(f"not an accsim {f['kind']}: " + exc.errors()[0]["msg"]
                              .removeprefix("Value error, ")) from None
    return fields


def _fold(found: list, file: str) -> list:
    """Identical operators as one with repeat; measured times summed; named
    layer_type_N in order of first appearance."""
    groups: dict[str, list] = {}
    for fields, measured, event in found:
        key = json.dumps(fields, sort_keys=True)
        if key in groups:
            group = groups[key]
            group[1] += 1
            group[2] = measured if group[2] is None else \
                group[2] + (measured or 0.0)
        else:
            groups[key] = [fields, 1, measured, event]
    operators = []
    numbers: dict[str, int] = {}
    for fields, repeat, measured, event in groups.values():
        label = fields["layer_type"]
        numbers[label] = numbers.get(label, -1) + 1
        extra = {"repeat": repeat} if repeat > 1 else {}
        if measured is not None:
            extra["measured_s"] = round(measured, 12)  # the trace's ns, no float noise
        try:
            operators.append(OPERATOR.validate_python(
                {"name": f"{label}_{numbers[label]}", **fields, **extra}))
        except ValidationError as exc:
            error = exc.errors()[0]
            raise AccsimError(f"cannot be an accsim {fields['kind']}: "
                              f"{error['msg'].removeprefix('Value error, ')}",
                              file=file, field=event.where) from None
    return operators
