"""Constraints: comparisons over a point's platform fields that decide whether the
point is simulated at all, e.g. `buffers.ifmap_bytes + buffers.weight_bytes <= 2**21`.

A spec is data, so a constraint is parsed with `ast` into a tiny whitelisted grammar
and walked here, never evaluated by Python: comparisons (< <= > >= == !=, chained),
and / or / not, arithmetic (+ - * / // % and ** with a small constant exponent),
numbers, quoted strings, and dotted platform fields. Anything else is a spec error.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simulator.errors import AccsimError

COMPARISONS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.Eq: operator.eq, ast.NotEq: operator.ne,
}
ARITHMETIC: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
SIGNS: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
# A larger constant exponent only makes numbers no platform field can reach.
MAX_EXPONENT = 64
# A power whose result would exceed this many bits is refused when evaluated (2**64
# of a field is fine; (x**64)**64 would take minutes and gigabytes).
MAX_POWER_BITS = 4096
# A constraint is a line of a spec: longer text, more syntax nodes or deeper nesting
# than this is refused before it is walked (the walk recurses once per level).
MAX_CONSTRAINT_CHARS = 2000
MAX_CONSTRAINT_NODES = 500
MAX_CONSTRAINT_DEPTH = 50
# A refusal quotes this much of the constraint at most.
EXCERPT_CHARS = 120
ALLOWED = ("comparisons (< <= > >= == !=), and/or/not, + - * / // % **, numbers, "
           "quoted strings and dotted platform fields")


@dataclass(frozen=True)
class Constraint:
    """One parsed constraint: its text, its tree, and the fields it reads."""

    text: str
    tree: ast.expr
    fields: tuple[str, ...]

    def holds(self, platform: dict) -> bool:
        """Whether the constraint is true for a platform (canonical JSON dict)."""
        return bool(evaluate(self.tree, platform))


def parse_constraint(text: str, base: dict, *, file: str, field: str) -> Constraint:
    """Parse one constraint and check that every field it reads is on the platform and
    that it evaluates on the base platform."""
    def refuse(rule: str) -> AccsimError:
        shown = text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "..."
        return AccsimError(f"{rule} in {shown!r}", file=file, field=field)

    if not isinstance(text, str) or not text.strip():
        raise AccsimError("a constraint is a non-empty comparison", file=file, field=field)
    if len(text) > MAX_CONSTRAINT_CHARS:
        raise AccsimError(f"{len(text):,} characters (a constraint has at most "
                          f"{MAX_CONSTRAINT_CHARS:,})", file=file, field=field)
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise refuse(f"not a valid expression ({exc.msg})") from None
    except ValueError as exc:  # NUL bytes, an over-long integer literal
        raise refuse(f"not a valid expression ({exc})") from None
    except (RecursionError, MemoryError):
        raise refuse("nested too deeply to parse") from None
    nodes, depth = size_of(tree)
    if nodes > MAX_CONSTRAINT_NODES or depth > MAX_CONSTRAINT_DEPTH:
        raise AccsimError(f"{nodes:,} terms nested {depth} deep (a constraint has at most "
                          f"{MAX_CONSTRAINT_NODES} terms, nested at most "
                          f"{MAX_CONSTRAINT_DEPTH} deep)", file=file, field=field)
    if not isinstance(tree, ast.Compare | ast.BoolOp) and not (
            isinstance(tree, ast.UnaryOp) and isinstance(tree.op, ast.Not)):
        raise refuse("a constraint must be a comparison (or several joined by and/or)")
    fields: list[str] = []
    for node in ast.walk(tree):
        problem = disallowed(node)
        if problem:
            raise refuse(f"{problem} is not allowed (allowed: {ALLOWED})")
        if isinstance(node, ast.Attribute | ast.Name) and not is_part_of_path(node, tree):
            fields.append(dotted_name(node))
    for name in fields:
        if not isinstance(lookup(base, name), int | float | str | bool):
            raise refuse(f"{name!r} is not a platform field holding a number or string")
    constraint = Constraint(text, tree, tuple(fields))
    try:
        constraint.holds(base)
    except (TypeError, ZeroDivisionError, OverflowError) as exc:
        raise refuse(f"cannot be evaluated on the base platform ({exc})") from None
    return constraint


def size_of(tree: ast.AST) -> tuple[int, int]:
    """(syntax nodes, deepest nesting) of a tree, walked without recursion."""
    nodes = deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return nodes, deepest


def arithmetic(op: ast.operator, left: Any, right: Any) -> Any:
    """One arithmetic step on numbers only (text times a number would build a string
    of any length), with powers bounded to MAX_POWER_BITS."""
    for value in (left, right):
        if isinstance(value, str) or not isinstance(value, int | float):
            raise TypeError(f"arithmetic on {type(value).__name__} {value!r:.40}")
    if isinstance(op, ast.Pow) and isinstance(left, int) and abs(left) > 1 \
            and right > 0 and left.bit_length() * right > MAX_POWER_BITS:
        raise OverflowError(f"a power of more than {MAX_POWER_BITS} bits")
    return ARITHMETIC[type(op)](left, right)


def disallowed(node: ast.AST) -> str | None:
    """What makes a node fall outside the grammar, or None."""
    if isinstance(node, ast.Compare):
        bad = [op for op in node.ops if type(op) not in COMPARISONS]
        return type(bad[0]).__name__ if bad else None
    if isinstance(node, ast.BinOp):
        if type(node.op) not in ARITHMETIC:
            return type(node.op).__name__
        if isinstance(node.op, ast.Pow) and not (
                isinstance(node.right, ast.Constant) and type(node.right.value) is int
                and abs(node.right.value) <= MAX_EXPONENT):
            return f"** other than to a constant integer of at most {MAX_EXPONENT}"
        return None
    if isinstance(node, ast.UnaryOp):
        return None if type(node.op) in SIGNS or isinstance(node.op, ast.Not) \
            else type(node.op).__name__
    if isinstance(node, ast.Constant):
        return None if type(node.value) in (int, float, str) else repr(node.value)
    if isinstance(node, ast.Attribute):
        return None if isinstance(node.value, ast.Attribute | ast.Name) \
            else "attribute of an expression"
    if isinstance(node, ast.Name):
        return None if isinstance(node.ctx, ast.Load) else "assignment"
    allowed_structure = (ast.BoolOp, ast.And, ast.Or, ast.Load, *COMPARISONS, *ARITHMETIC,
                         *SIGNS, ast.Not)
    return None if isinstance(node, allowed_structure) else type(node).__name__


def is_part_of_path(node: ast.AST, tree: ast.AST) -> bool:
    """Whether a Name/Attribute is the inner part of a longer dotted path."""
    return any(isinstance(parent, ast.Attribute) and parent.value is node
               for parent in ast.walk(tree))


def dotted_name(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    parts.append(node.id)
    return ".".join(reversed(parts))


def lookup(platform: dict, path: str) -> Any:
    """The value at a dotted path of a platform dict, or None where there is none."""
    node: Any = platform
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def evaluate(node: ast.expr, platform: dict) -> Any:
    """Walk a checked tree (only the node kinds `disallowed` lets through)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name | ast.Attribute):
        return lookup(platform, dotted_name(node))
    if isinstance(node, ast.UnaryOp):
        value = evaluate(node.operand, platform)
        return not value if isinstance(node.op, ast.Not) else SIGNS[type(node.op)](value)
    if isinstance(node, ast.BinOp):
        return arithmetic(node.op, evaluate(node.left, platform),
                          evaluate(node.right, platform))
    if isinstance(node, ast.BoolOp):
        values = (evaluate(value, platform) for value in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    left = evaluate(node.left, platform)
    for op, right_node in zip(node.ops, node.comparators):
        right = evaluate(right_node, platform)
        if not COMPARISONS[type(op)](left, right):
            return False
        left = right
    return True
