"""No positional tuple of more than MAX_POSITIONAL values crosses a module boundary
(issue 40): a call from one package module to a function or class another package
module defines passes at most MAX_POSITIONAL arguments by position; more go by name, or
as a named record (a frozen dataclass, a NamedTuple) the callee's module unpacks. A
spread (`f(*values)`) counts as many as the callee's positional parameters, when it
has more than MAX_POSITIONAL of them. A function of *args takes a list of like values,
not a positional tuple: calls to one are not counted.

Read from the source with ast (nothing is imported): a call is seen when its callee is
a name imported from a package module (`from simulator.x import f`, then `f(...)`) or an
attribute of an imported package module (`import simulator.x as x`, then `x.f(...)`).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "simulator"
MAX_POSITIONAL = 6
VARIADIC = -1


def _module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _positional_params(node: ast.AST) -> int | None:
    """How many arguments a top-level definition takes by position (a class: its
    __init__'s, less self; None when it cannot be told from the source). VARIADIC
    for a function of *args: a list of like values (option names, say), not a tuple
    of values with a role each."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = node.args
        return VARIADIC if args.vararg else len(args.posonlyargs) + len(args.args)
    if isinstance(node, ast.ClassDef):
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                count = _positional_params(item)
                return None if count is None else count - 1
    return None


def _definitions(trees: dict[str, ast.Module]) -> dict[tuple[str, str], int | None]:
    """(module, name) -> positional parameters of each top-level def and class."""
    return {(module, node.name): _positional_params(node)
            for module, tree in trees.items() for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _imports(tree: ast.Module, modules: set[str]) -> tuple[dict, dict]:
    """The module's names for other package modules' definitions ({local name:
    (module, name)}) and for package modules themselves ({local name: module})."""
    names, aliases = {}, {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in modules:
                    aliases[alias.asname or alias.name] = full
                elif node.module in modules:
                    names[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in modules:
                    aliases[alias.asname] = alias.name
    return names, aliases


def _callee(func: ast.expr, names: dict, aliases: dict) -> tuple[str, str] | None:
    if isinstance(func, ast.Name):
        return names.get(func.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id in aliases:
        return aliases[func.value.id], func.attr
    return None


def long_positional_calls(package: Path = PACKAGE) -> list[str]:
    """'module:line callee (n positional)' for each call breaking the rule."""
    trees = {_module_name(path, package): ast.parse(path.read_text(encoding="utf-8"), str(path))
             for path in sorted(package.rglob("*.py"))}
    definitions = _definitions(trees)
    found = []
    for module, tree in trees.items():
        names, aliases = _imports(tree, set(trees))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            callee = _callee(node.func, names, aliases)
            if callee is None or callee[0] == module:
                continue
            spread = any(isinstance(arg, ast.Starred) for arg in node.args)
            params = definitions.get(callee)
            if params == VARIADIC:
                continue
            count = params if spread and params is not None else len(node.args)
            if count > MAX_POSITIONAL:
                found.append(f"{module}:{node.lineno} {'.'.join(callee)} "
                             f"({count} positional)")
    return found


def test_no_long_positional_tuple_crosses_a_module_boundary():
    assert long_positional_calls() == []


def test_the_check_sees_a_long_call_and_a_spread(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "kernel.py").write_text("def f(a, b, c, d, e, g, h):\n    return a\n"
                                       "def names(*names):\n    return names\n")
    (package / "caller.py").write_text(
        "from pkg.kernel import f, names\nimport pkg.kernel as k\n"
        "f(1, 2, 3, 4, 5, 6, 7)\nk.f(*range(7))\nf(1, 2, 3, 4, 5, 6, h=7)\n"
        "names(1, 2, 3, 4, 5, 6, 7)\n")
    found = long_positional_calls(package)
    assert found == ["pkg.caller:3 pkg.kernel.f (7 positional)",
                     "pkg.caller:4 pkg.kernel.f (7 positional)"]
