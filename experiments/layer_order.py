"""The package's layer order (DESIGN.md section 1), checked: every import of simulator's
own modules goes to a module of the same layer or one below it, never back up.

The order is data (LAYERS, lowest first); a module belongs to the layer of the longest
prefix that names it, so a wing may hold modules of two layers where it must (inputs:
the schemas low, `inputs.named_inputs` above the importers it calls; kernels: the lazy JIT
low, the ahead-of-time table above the engines it compiles). Command modules (every
verb's `*_command`, wherever its package) form the top layer with cli. Imports are read
from the source, at module level and inside functions, as
../shared/tools/import_graph.py reads them; nothing is imported.

No two modules share a name (package __init__ aside): `repeated_names` lists any.

Usage, from the repository root: python experiments/layer_order.py
Prints the layers, each back-up import (module, line, target) and each module name
carried twice; exit 1 if any.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "simulator"

# Lowest first. A prefix names a module or a subpackage (and everything under it).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("simulator.errors", "simulator.numbers", "simulator.options.rules",
              "simulator.code_version",
              "simulator.kernels.jit", "simulator.kernels.library", "simulator.output")),
    ("model", ("simulator.model",)),
    ("inputs", ("simulator.inputs",)),
    ("program", ("simulator.program", "simulator.collectives")),
    ("mapping", ("simulator.mapping", "simulator.inputs.run_inputs")),
    ("lowering", ("simulator.lowering",)),
    ("engines", ("simulator.limits", "simulator.engines", "simulator.invocation")),
    ("metrics", ("simulator.metrics",)),
    ("search", ("simulator.search",)),
    ("simulate", ("simulator.simulate", "simulator.kernels")),
    ("present", ("simulator.present", "simulator.verification")),
    ("frontends", ("simulator.frontends", "simulator.precision")),
    ("resolve", ("simulator.inputs.named_inputs",)),
    ("system", ("simulator.system", "simulator.calibrate")),
    ("serving", ("simulator.serving",)),
    ("studies", ("simulator.sweep", "simulator.export")),
    ("review", ("simulator.review",)),
    ("api", ("simulator.api", "simulator.options")),
    # Measured runs for calibration are `accsim run` command lines: reading them (and
    # fitting and writing from what they read) is the command layer's work.
    ("commands", ("simulator.commands", "simulator.cli", "simulator.calibrate.measured_runs",
                  "simulator.calibrate.whole", "simulator.calibrate.fitted_file")),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_command(module: str) -> bool:
    """A verb's command module: `*_command` in any package."""
    return module.rpartition(".")[2].endswith("_command")


def layer_of(module: str) -> int:
    if is_command(module):
        return len(LAYERS) - 1
    if module == "simulator":  # the package itself: below everything
        return 0
    best, level = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, level = len(prefix), index
    if level < 0:
        raise SystemExit(f"{module}: in no layer of LAYERS")
    return level


def imports(path: Path, module: str, modules: set[str]):
    """(line, imported module) for each import of the package's own modules."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = module if is_package else module.rpartition(".")[0]
            for _ in range(max(node.level - 1, 0)):
                base = base.rpartition(".")[0]
            target = node.module or ""
            if node.level:
                target = f"{base}.{target}" if target else base
            names = [f"{target}.{alias.name}" for alias in node.names]
            names = [n if n in modules else target for n in names]
        else:
            continue
        for name in names:
            if name in modules and name != module:
                yield node.lineno, name


def back_up_imports() -> list[str]:
    files = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    found = []
    for module, path in files.items():
        here = layer_of(module)
        for line, target in sorted(set(imports(path, module, set(files)))):
            # A module imports its own package's __init__ implicitly; not an edge.
            if module.startswith(target + ".") and path.name != "__init__.py":
                continue
            there = layer_of(target)
            if there > here:
                found.append(f"back-up import: {module}:{line} -> {target} "
                             f"({LAYERS[here][0]} -> {LAYERS[there][0]})")
    return found


def repeated_names() -> list[str]:
    """Module names (package __init__ aside) that more than one module carries: a name
    says what its module holds, so two modules may not share one (issue 40)."""
    paths: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name != "__init__.py":
            paths.setdefault(path.stem, []).append(module_name(path))
    return [f"repeated name: {name} ({', '.join(held)})"
            for name, held in sorted(paths.items()) if len(held) > 1]


def main() -> int:
    for name, prefixes in LAYERS:
        print(f"{name:>10}: {', '.join(p.removeprefix('simulator.') for p in prefixes)}")
    print(f"{'':>10}  (and every verb's command module, at the top)")
    found, repeated = back_up_imports(), repeated_names()
    print("\n".join(found + repeated))
    print(f"layer order: {len(LAYERS)} layers, {len(found)} back-up imports, "
          f"{len(repeated)} repeated module names")
    return 1 if found or repeated else 0


if __name__ == "__main__":
    sys.exit(main())
