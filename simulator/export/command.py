"""`accsim export FORMAT`: pre-silicon profiles for other tools (Vidur, Chakra for
ASTRA-sim, LLMServingSim) from accsim's simulated operator times. An existing output
folder is checked before anything is simulated; a new one is made only once there is
something to write."""

from __future__ import annotations

import argparse
import os

from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.export.chakra import chakra_files, trace_nodes, workload_nodes
from simulator.export.llmservingsim import llmservingsim_files
from simulator.export.profile import ModelProfile, check_limit
from simulator.export.vidur import vidur_files
from simulator.inputs.loader import load_model, locate
from simulator.options.catalog import OPTIONS, add_options
from simulator.output.files import OutputFolder
from simulator.serving.cost import OperatorCosts
from simulator.output.terminal import plain
from simulator.inputs.workload import Workload

FORMATS = ("vidur", "chakra", "llmservingsim")
MARKER = ".accsim-export"  # lists the files an export wrote (simulator.output.files)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `accsim export`."""
    add = parser.add_argument
    add("format", metavar="FORMAT", help=f"one of {', '.join(FORMATS)}")
    add_options(parser, "export", "inputs", "llm", "system", "outputs")
    add_options(parser, "export", "serving")
    add("--bits", type=int, help="grid density: sizes with at most this many significant "
        "bits are simulated (vidur default 1: powers of two; llmservingsim default 2)")
    add("--block-size", type=int, default=16, help="vidur: the KV block size its "
        "attention rows are filtered on (default 16)")
    add("--kv-granularity", type=int, default=64, help="llmservingsim: step of "
        "kv_cache_size in the attention predictions (default 64)")
    add("--hardware", help="llmservingsim: the hardware folder name (default: the "
        "platform's name)")
    add("--tokens", type=int, default=512, help="chakra: prompt tokens (prefill) or "
        "context tokens (decode) per request (default 512)")
    parser.set_defaults(handler=handle)


def _platform(arch: str) -> tuple[Platform, str | None]:
    platform, source = load_model(locate(arch, "platform"), Platform)
    return platform, source.path


def _profile(args: argparse.Namespace, platform: Platform, file: str | None
             ) -> ModelProfile:
    if not args.model:
        raise AccsimError(f"{args.format} needs --model (a config.json or a shipped "
                          "model name)", field="--model")
    OPTIONS["--tp"].check(args.tp)
    return ModelProfile(platform, args.model, tp=args.tp, dtype=args.dtype,
                        platform_file=file)


def _folder_name(text: str, field: str) -> str:
    """A name a path of the export is made of (device, hardware, model, workload):
    checked before anything is simulated, so a bad one costs no simulation."""
    if text in ("", ".", "..") or "/" in text or "\\" in text or "\x00" in text:
        raise AccsimError(f"{text!r} cannot name a folder of the export (one plain "
                          "folder name, no '/' and not '.' or '..')", field=field)
    return text


def _option(args, name: str, default: int) -> int:
    value = getattr(args, name)
    return check_limit(default if value is None else value,
                       f"--{name.replace('_', '-')}")


def _bits(args, default: int) -> int:
    bits = default if args.bits is None else args.bits
    if not 1 <= bits <= 16:
        raise AccsimError(f"must be from 1 to 16, found {bits}", field="--bits")
    return bits


def _files(args: argparse.Namespace) -> dict[str, str | bytes]:
    platform, file = _platform(args.arch)
    if args.format == "chakra":
        return _chakra(args, platform, file)
    if args.workload:
        raise AccsimError(f"{args.format} profiles an LLM: give --model, not --workload",
                          field="--workload")
    profile = _profile(args, platform, file)
    _folder_name(profile.config.name, "--model")
    _folder_name(platform.name, "--arch")
    if args.format == "vidur":
        return vidur_files(profile, max_tokens=_option(args, "max_tokens", 4096),
                           max_batch=_option(args, "max_batch", 128),
                           block_size=check_limit(args.block_size, "--block-size"),
                           bits=_bits(args, 1))
    hardware = _folder_name(args.hardware or platform.name, "--hardware")
    return llmservingsim_files(profile, hardware=hardware,
                               max_tokens=_option(args, "max_tokens", 2048),
                               max_batch=_option(args, "max_batch", 64),
                               kv_granularity=check_limit(args.kv_granularity,
                                                          "--kv-granularity"),
                               bits=_bits(args, 2))


def _chakra(args: argparse.Namespace, platform: Platform, file: str | None) -> dict:
    if bool(args.model) == bool(args.workload):
        raise AccsimError("chakra traces one of --model or --workload: give exactly one",
                          field="--model")
    if args.workload:
        if args.tp != 1:
            raise AccsimError("a plain workload's trace is one chip's; drop --tp",
                              field="--tp")
        workload, _ = load_model(locate(args.workload, "workload"), Workload)
        _folder_name(workload.name, "--workload")
        nodes = workload_nodes(OperatorCosts(platform), workload)
        return chakra_files(nodes, f"{workload.name} on {platform.name}", workload.name, 1)
    profile = _profile(args, platform, file)
    _folder_name(profile.config.name, "--model")
    batch, tokens = check_limit(args.batch, "--batch"), check_limit(args.tokens, "--tokens")
    prefill = [(tokens, 0)] * batch if args.phase == "prefill" else []
    decode = [tokens] * batch if args.phase == "decode" else []
    name = f"{profile.config.name}_{args.phase}_b{batch}_t{tokens}"
    description = (f"{profile.config.name} {args.phase}, batch {batch}, {tokens} tokens, "
                   f"on {platform.name}, one chip of {profile.tp}")
    return chakra_files(trace_nodes(profile, prefill, decode), description, name,
                        profile.tp)


def handle(args: argparse.Namespace) -> int:
    if args.format not in FORMATS:
        raise AccsimError(f"unknown format {args.format!r}; known: {', '.join(FORMATS)}",
                          field="FORMAT")
    # An existing folder is checked before the simulation (a foreign one is refused
    # without waiting for it); a new one is made only once there is something to write.
    claim = (lambda: OutputFolder.claim(args.output, MARKER, field="--output",
                                        signature="accsim export"))
    early = claim() if os.path.lexists(args.output) else None
    try:
        files = _files(args)
    except BaseException:
        if early is not None:
            early.close()
        raise
    with early or claim() as folder:
        for relative in sorted(files):
            folder.write(relative, files[relative])
        folder.remove_stale(set())
        folder.finish()
    for relative in sorted(files):
        print(plain(f"wrote {folder.shown(relative)}"))
    return 0
