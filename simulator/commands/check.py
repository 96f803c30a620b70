"""`accsim check FILE`: validate a platform, workload, tiling plan or precision plan
(told apart by its top-level keys, or as --kind says); with --arch or --workload, check
a tiling plan against them buffer by buffer (simulator.present.plan_check)."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from simulator.frontends import scalesim
from simulator.inputs.named_inputs import (DEFAULT_ARCH, DEFAULT_WORKLOAD, SCHEMAS,
                                       guess_kind, load_inputs, locate_any)
from simulator.errors import AccsimError
from simulator.inputs.platform import Platform
from simulator.mapping.plan import Mapping
from simulator.inputs.loader import parse_yaml, read_source, validate_model
from simulator.inputs.platform_file import load_platform, overrides_of
from simulator.options.catalog import add_options
from simulator.present.plan_check import check_plan, plan_check_table
from simulator.output.terminal import console as report_console, echo
from simulator.output.terminal import plain
from simulator.inputs.workload import Workload
from simulator.limits import check_platform
from simulator.precision.precision_plan import PrecisionPlan, reads_as_precision_plan
from simulator.output.wording import counted

KINDS = {**SCHEMAS, "precision": PrecisionPlan}   # what --kind names, and its schema
SHOWN = {"precision": "precision plan"}             # a kind's name where it is not --kind's


def handle(args: argparse.Namespace) -> int:
    if args.arch or args.workload:
        return _check_plan(args)
    if scalesim.is_scalesim_config(args.file):
        model, source, _ = scalesim.load_config(args.file)
        kind = "platform (SCALE-Sim config)"
    elif scalesim.is_scalesim_topology(args.file):
        model, source, topology = scalesim.load_topology(args.file)
        kind = f"workload (SCALE-Sim {topology.kind} topology)"
    else:
        source = read_source(locate_any(args.file, args.kind if args.kind in SCHEMAS
                                        else None))
        raw = parse_yaml(source.text, file=source.path)
        kind = args.kind or file_kind(raw)
        model = load_platform(source.path)[0] if kind == "platform" else \
            validate_model(raw, KINDS[kind], file=source.path)
    if isinstance(model, Platform):
        check_platform(model, source.path)  # what every run would refuse
        array = model.systolic_array
        arrays = f"{array.count} x " if array.count > 1 else ""
        detail = (f"{arrays}{array.rows}x{array.cols} {'/'.join(array.input_dtypes)} "
                  f"({array.fold_model} folds) at {model.clock_ghz} GHz, "
                  f"{model.peak_flops / 1e12:,.2f} TFLOP/s peak, "
                  f"{model.offchip.bandwidth_gbps:g} GB/s")
    elif isinstance(model, Workload):
        detail = counted(len(model.operators), "operator")
    else:
        operators = counted(len(model.operators), "operator entry", "operator entries")
        layer_types = counted(len(model.layer_types), "layer_type entry",
                              "layer_type entries")
        detail = f"{operators} and {layer_types}"
    echo(f"{source.path}: valid {SHOWN.get(kind, kind)} ({detail})")
    if isinstance(model, Platform):
        if kind == "platform":
            _print_overrides(source.path, model)
        _print_assumptions(model)
    return 0


def file_kind(raw) -> str:
    """The kind of a decoded YAML file by its keys: a precision plan, or the kind of
    guess_kind's platform, workload and tiling plan (`mapping`)."""
    return "precision" if reads_as_precision_plan(raw) else guess_kind(raw)


def _print_overrides(path: str, platform: Platform) -> None:
    """What a platform file over a base sets (its name and description aside), each
    field with the base's value and the kind of its provenance entry."""
    base, fields = overrides_of(path)
    if base is None:
        return
    fields = [field for field in fields if field[0] not in ("name", "description")]
    echo(f"base: {base}; this file overrides {len(fields)} field"
         f"{'s' if len(fields) != 1 else ''}:")
    for field, was, now in fields:
        entry = platform.provenance.get(field)
        cited = f"; {entry.kind}" if entry is not None else ""
        echo(f"  {field}: {_shown(now)}  (base: {_shown(was)}{cited})")


def _shown(value) -> str:
    """A value as a platform file writes it, on one line (absent: `-`)."""
    if value is None:
        return "-"
    return plain(json.dumps(value, separators=(", ", ": ")))


def _print_assumptions(platform: Platform) -> None:
    """The assumed (and fitted) values with their ranges, and how many of the numeric
    fields the provenance table leaves unannotated."""
    listed = platform.assumptions()
    fields = platform.numeric_fields()
    if not platform.provenance:
        echo(f"provenance: none ({len(fields)} numeric fields unannotated)")
        return
    kinds = Counter(entry.kind for entry in platform.provenance.values())
    bare = sum(1 for path in fields if path not in platform.provenance)
    echo("provenance: " + ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
         + (f", {bare} unannotated" if bare else ""))
    for path, entry in listed.items():
        span = f"range [{entry['range'][0]:g}, {entry['range'][1]:g}]" \
            if "range" in entry else f"fitted to {entry.get('source')}"
        echo(f"  {entry['kind']} {path} = {entry['value']:g}  {span}")


def _refuse_other_kinds(args: argparse.Namespace) -> None:
    """--arch and --workload check a tiling plan against them: a platform or workload
    as FILE is told so (read as a plan, it failed on fields a plan has not, or was no
    shipped plan), with the command that validates it."""
    flag = "--arch" if args.arch else "--workload"
    kind = args.kind
    if kind is None and (scalesim.is_scalesim_config(args.file)
                         or scalesim.is_scalesim_topology(args.file)):
        kind = "SCALE-Sim"
    elif kind is None:
        try:
            raw = parse_yaml(read_source(locate_any(args.file, None)).text,
                             file=args.file)
        except AccsimError:
            return  # unreadable: the plan's reading names why
        try:
            validate_model(raw, Mapping, file=args.file)
            return
        except AccsimError:
            kind = file_kind(raw)
    if kind != "mapping":
        shown = SHOWN.get(kind, kind)
        raise AccsimError(f"is a {shown} file, not a tiling plan: with --arch or "
                          "--workload, check tests a plan on them (accsim check PLAN "
                          f"--arch A --workload W); drop {flag} to validate the {shown} "
                          "file", file=args.file, field=flag)


def _check_plan(args: argparse.Namespace) -> int:
    _refuse_other_kinds(args)
    inputs = load_inputs(args.arch or DEFAULT_ARCH, args.workload or DEFAULT_WORKLOAD,
                         args.file)
    report = check_plan(inputs)
    report_console(wide=args.wide).print(plan_check_table(report))
    for warning in report.warnings:
        print(f"accsim: warning: {args.file}: {plain(warning)}", file=sys.stderr)
    for where, rule in report.errors:
        print(f"accsim: error: {args.file}: {plain(where)}: {plain(rule)}",
              file=sys.stderr)
    checked = sum(1 for op in report.operators if op.fused_into is None)
    if report.ok:
        echo(f"{args.file}: plan fits {report.workload} on {report.platform} "
             f"({counted(checked, 'operator')})")
        return 0
    print(f"{args.file}: plan REJECTED for {report.workload} on {report.platform}: "
          f"{len(report.errors)} errors", file=sys.stderr)
    return 1


def add_arguments(check: argparse.ArgumentParser) -> None:
    check.add_argument("file", help="a YAML file, a SCALE-Sim .cfg or topology .csv, or "
                       "a shipped name")
    check.add_argument("--kind", choices=sorted(KINDS),
                       help="default: told apart by the file's top-level keys")
    add_options(check, "check", "inputs", "table")
    check.set_defaults(handler=handle)
