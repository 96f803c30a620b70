"""`accsim export FORMAT`: pre-silicon profiles for other tools (Vidur, Chakra for
ASTRA-sim, LLMServingSim) from accsim's simulated operator times. An existing output
folder is checked before anything is simulated; a new one is made only once there is
something to write."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.export.chakra import (chakra_files, trace_nodes,
                                     workload_nodes)
from simulator.export.llmservingsim import llmservingsim_files
from simulator.export.llmservingsim_v1 import layers_csv_files
from simulator.export.naming import device_name, folder_name, model_id
from simulator.export.profile import ModelProfile, check_limit
from simulator.export.tables import MAX_TABLE_BYTES, Earlier
from simulator.export.vidur import vidur_files
from simulator.export.vidur_device import (DEVICE_FILE, LAUNCHER, LAUNCHER_TEXT,
                                           MODEL_FILE, device_json, devices_per_node,
                                           model_json)
from simulator.inputs.loader import read_source
from simulator.inputs.platform_file import load_platform
from simulator.output import progress
from simulator.output.files import OutputFolder
from simulator.system.capacity import check
from simulator.system.parallelism import MAX_CHIPS
from simulator.system.shard import serving_sizing
from simulator.inputs.loader import load_model, locate
from simulator.options.catalog import add_options
from simulator.options.rules import whole
from simulator.numbers import decimal_int
from simulator.output.terminal import plain
from simulator.inputs.workload import Workload

FORMATS = ("vidur", "chakra", "llmservingsim")
MARKER = ".accsim-export"  # lists the files an export wrote (simulator.output.files)
# Per format: the largest tokens and decode batch, the grid density of the token axis
# and of the attention axes (sizes with at most that many significant bits).
DEFAULTS = {
    "vidur": {"max_tokens": 4096, "max_batch": 128, "bits": 5, "attention_bits": 3},
    "llmservingsim": {"max_tokens": 2048, "max_batch": 512, "bits": 4,
                      "attention_bits": 2},
    "layers_csv": {"max_tokens": 2048, "max_batch": 512, "bits": 2, "attention_bits": 2},
}
# The defaults of the options one export alone reads (None on the command line, so
# that one given to an export that does not read it is refused, not ignored).
FIXED_DEFAULTS = {"phase": "prefill", "batch": 1, "tokens": 512, "block_size": 16,
                  "kv_granularity": 64}
# Each option that not every export reads, and the exports that read it (_export).
_TABLES = ("vidur", "llmservingsim", "llmservingsim --layers-csv")
READ_BY = {
    "--phase": ("chakra --model",), "--batch": ("chakra --model",),
    "--tokens": ("chakra --model",), "--dtype": ("chakra --model", *_TABLES),
    "--model-id": _TABLES, "--hardware": _TABLES, "--max-tokens": _TABLES,
    "--max-batch": _TABLES, "--bits": _TABLES, "--attention-bits": _TABLES[:2],
    "--block-size": ("vidur",), "--layers-csv": ("llmservingsim --layers-csv",),
    "--kv-granularity": ("llmservingsim --layers-csv",),
    "--ignore-capacity": ("chakra --model",),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `accsim export`."""
    add = parser.add_argument
    add("format", metavar="FORMAT", help=f"one of {', '.join(FORMATS)}")
    add_options(parser, "export", "inputs", "llm", "system", "capacity", "outputs")
    add_options(parser, "export", "serving")
    add("--model-id", help="vidur, llmservingsim: the model's Hugging Face id (org/name), "
        "the folder the tools find it in (default: the config's _name_or_path, or the "
        "shipped model's id)")
    add("--bits", type=whole, help="token-axis grid density: sizes with at most this many "
        "significant bits are simulated (vidur default 5, llmservingsim 4)")
    add("--attention-bits", type=whole, help="the same for the attention tables' chunk and "
        "batch axes (vidur default 3, llmservingsim 2; KV sizes: powers of two)")
    add("--block-size", type=whole, help="vidur: the KV block size its "
        "attention rows are filtered on (default 16)")
    add("--hardware", help="vidur, llmservingsim: the device folder name (default: the "
        "platform's name, '/' written '_')")
    add("--layers-csv", action="store_true", help="llmservingsim: write its v1.0 "
        "layers.csv tables instead of the bundle it reads since v1.1.0")
    add("--kv-granularity", type=whole, help="llmservingsim --layers-csv: step "
        "of kv_cache_size in the attention predictions (default 64)")
    add("--tokens", type=whole, help="chakra: prompt tokens (prefill) or "
        "context tokens (decode) per request (default 512)")
    parser.set_defaults(handler=handle)


def _export(args: argparse.Namespace) -> str:
    """Which export the arguments ask for, as READ_BY names it."""
    if args.format == "chakra":
        return "chakra --model" if args.workload is None else "chakra --workload"
    return "llmservingsim --layers-csv" if args.format == "llmservingsim" and \
        args.layers_csv else args.format


def _read_options(args: argparse.Namespace) -> None:
    """Refuse an option the export asked for does not read (a value it would ignore
    is a mistake, whatever it is), then fill in the defaults of those left out."""
    export = _export(args)
    for flag, readers in READ_BY.items():
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None and value is not False and export not in readers:
            raise AccsimError(f"`export {export}` does not read {flag} (only "
                              f"{', '.join(f'`export {r}`' for r in readers)}): drop it",
                              field=flag)
    for name, default in FIXED_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)


def _platform(arch: str) -> tuple[Platform, str | None]:
    platform, source = load_platform(locate(arch, "platform"))
    return platform, source.path


def _degrees(text: str, *, many: bool) -> list[int]:
    """--tp: one degree, or (vidur, llmservingsim) a comma-separated list of them."""
    try:
        degrees = [decimal_int(part.strip()) for part in str(text).split(",")]
    except ValueError:
        raise AccsimError(f"must be whole numbers separated by ',', found {text!r}",
                          field="--tp") from None
    if len(degrees) > 1 and not many:
        raise AccsimError("a trace is one iteration of one group: give one degree",
                          field="--tp")
    for degree in degrees:
        if not 1 <= degree <= MAX_CHIPS:
            raise AccsimError(f"must be from 1 to {MAX_CHIPS}, found {degree}",
                              field="--tp")
    return sorted(set(degrees))


def _profiles(args: argparse.Namespace, platform: Platform, file: str | None,
              degrees: list[int], simulated: Callable[[], None]) -> list[ModelProfile]:
    if args.model is None:
        raise AccsimError(f"{args.format} needs --model (a config.json or a shipped "
                          "model name)", field="--model")
    return [ModelProfile(platform, args.model, tp=tp, dtype=args.dtype,
                         platform_file=file, simulated=simulated)
            for tp in degrees]


def _option(args, name: str, defaults: dict) -> int:
    value = getattr(args, name)
    return check_limit(defaults[name] if value is None else value,
                       f"--{name.replace('_', '-')}")


def _bits(args, name: str, defaults: dict) -> int:
    value = getattr(args, name)
    bits = defaults[name] if value is None else value
    if not 1 <= bits <= 16:
        raise AccsimError(f"must be from 1 to 16, found {bits}",
                          field=f"--{name.replace('_', '-')}")
    return bits


def _files(args: argparse.Namespace, earlier: Earlier, simulated: Callable[[], None]
           ) -> dict[str, str | bytes]:
    """The export's files by path inside the folder; `simulated` is called once per
    iteration shape simulated."""
    platform, file = _platform(args.arch)
    if args.format == "chakra":
        return _chakra(args, platform, file, simulated)
    if args.workload is not None:
        raise AccsimError(f"{args.format} profiles an LLM: give --model, not --workload",
                          field="--workload")
    degrees = _degrees(args.tp, many=True)
    device = (folder_name(args.hardware, "--hardware") if args.hardware is not None
              else device_name(platform.name))
    profiles = _profiles(args, platform, file, degrees, simulated)
    first = profiles[0]
    hub = model_id(args.model_id, first.config.source, args.model)
    kind = "layers_csv" if args.format == "llmservingsim" and args.layers_csv \
        else args.format
    defaults = DEFAULTS[kind]
    limits = {name: _option(args, name, defaults) for name in ("max_tokens", "max_batch")}
    bits = {name: _bits(args, name, defaults) for name in ("bits", "attention_bits")}
    if kind == "vidur":
        return _vidur(args, profiles, device, hub, limits, bits, earlier)
    if kind == "layers_csv":
        return layers_csv_files(profiles, hardware=device, model_id=hub, **limits,
                                kv_granularity=check_limit(args.kv_granularity,
                                                           "--kv-granularity"),
                                bits=bits["bits"])
    config_text = read_source(first.config.source).text if first.config.source else ""
    return llmservingsim_files(profiles, hardware=device, model_id=hub,
                               config_text=config_text, **limits, **bits,
                               earlier=earlier)


def _vidur(args, profiles: list[ModelProfile], device: str, hub: str, limits: dict,
           bits: dict, earlier: Earlier) -> dict[str, str]:
    files = vidur_files(profiles, device=device, model_id=hub, **limits, **bits,
                        block_size=check_limit(args.block_size, "--block-size"),
                        earlier=earlier)
    device_path = f"data/profiling/network/{device}/{DEVICE_FILE}"
    per_node = devices_per_node(earlier(device_path), {p.tp for p in profiles},
                                earlier.shown(device_path))
    files[device_path] = device_json(profiles[0], device, per_node)
    files[f"data/profiling/compute/{device}/{hub}/{MODEL_FILE}"] = model_json(
        profiles[0], hub)
    files[LAUNCHER] = LAUNCHER_TEXT
    return files


def _chakra(args: argparse.Namespace, platform: Platform, file: str | None,
            simulated: Callable[[], None]) -> dict:
    if (args.model is None) == (args.workload is None):
        raise AccsimError("chakra traces one of --model or --workload: give exactly one",
                          field="--model")
    (tp,) = _degrees(args.tp, many=False)
    if args.workload is not None:
        if tp != 1:
            raise AccsimError("a plain workload's trace is one chip's; drop --tp",
                              field="--tp")
        workload, _ = load_model(locate(args.workload, "workload"), Workload)
        folder_name(workload.name, "--workload")
        nodes = workload_nodes(platform, workload)
        return chakra_files(nodes, f"{workload.name} on {platform.name}", workload.name,
                            1, platform)
    (profile,) = _profiles(args, platform, file, [tp], simulated)
    folder_name(profile.config.name, "--model")
    batch, tokens = check_limit(args.batch, "--batch"), check_limit(args.tokens, "--tokens")
    prefill = [(tokens, 0)] * batch if args.phase == "prefill" else []
    decode = [tokens] * batch if args.phase == "decode" else []
    # the iteration traced runs on one chip of the group, as `run` and `serve` would
    # run it: refused, before anything is simulated, where its weights, KV and
    # activations do not fit (unless --ignore-capacity)
    fit = check(profile.plan, serving_sizing(
        profile.config, platform, dtype=args.dtype,
        tokens=batch * tokens if prefill else batch, kv_tokens=batch * tokens,
        platform_file=file), platform, ignore=args.ignore_capacity, platform_file=file)
    if fit.note():
        print(plain(fit.note()))
    name = f"{profile.config.name}_{args.phase}_b{batch}_t{tokens}"
    description = (f"{profile.config.name} {args.phase}, batch {batch}, {tokens} tokens, "
                   f"on {platform.name}, one chip of {profile.tp}")
    return chakra_files(trace_nodes(profile, prefill, decode), description, name,
                        profile.tp, platform)


def handle(args: argparse.Namespace) -> int:
    if args.format not in FORMATS:
        raise AccsimError(f"unknown format {args.format!r}; known: {', '.join(FORMATS)}",
                          field="FORMAT")
    _read_options(args)
    # An existing folder (or an empty name) is checked before the simulation (a
    # foreign one is refused without waiting for it) and its earlier tables are read
    # back to merge into; a new one is made only once there is something to write.
    claim = (lambda: OutputFolder.claim(args.output, MARKER, field="--output",
                                        signature="accsim export"))
    early = claim() if os.path.lexists(args.output) or not args.output else None
    earlier = Earlier()
    if early is not None:
        listed = early.listed
        earlier = Earlier(lambda relative: early.read(relative, MAX_TABLE_BYTES)
                          if relative in listed else None, args.output)
    try:
        with progress.Bar(f"export {args.format}: iteration shapes simulated",
                          after_s=1.0) as bar:
            files = _files(args, earlier, bar.advance)
    except BaseException:
        if early is not None:
            early.close()
        raise
    with early or claim() as folder:
        for relative in sorted(files):
            folder.write(relative, files[relative])
        folder.remove_stale(set(folder.listed))  # an export adds; it removes nothing
        folder.finish()
    for relative in sorted(files):
        print(plain(f"wrote {folder.shown(relative)}"))
    return 0
