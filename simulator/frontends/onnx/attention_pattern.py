"""Finding attention written out as ops: MatMul(Q, K^T), then scale and mask ops, then
Softmax, then MatMul(scores, V). Each match becomes one accsim attention operator, so
the mapper can choose the unfused or the flash lowering for it (DESIGN.md section 9).

A match needs every intermediate tensor to feed only the next op of the chain (scores
used anywhere else must stay a real tensor), Q, K and V of one head size, and scores of
rank 3 or more ([..., heads, q_len, kv_len]). Masks are not read: the graph computes
every score, so the operator is not causal, and its MACs are the graph's.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from simulator.frontends.onnx.graph import Graph, Node
from simulator.frontends.shapes import numel

# Ops allowed between the two products: on the scores before the softmax (scale by
# 1/sqrt(d), add or select a mask, change precision) and after it.
BEFORE_SOFTMAX = frozenset({"Mul", "Div", "Add", "Sub", "Where", "Cast"})
AFTER_SOFTMAX = frozenset({"Cast", "Dropout", "Identity"})


@dataclass(frozen=True)
class Pattern:
    """One attention found: its nodes in graph order and the operator's fields."""

    nodes: tuple[Node, ...]
    fields: dict


def find_attention(graph: Graph) -> list[Pattern]:
    """Every MatMul-Softmax-MatMul chain of the graph."""
    producer = {out: node for node in graph.nodes for out in node.outputs}
    consumers: dict[str, list[Node]] = defaultdict(list)
    for node in graph.nodes:
        for tensor in node.inputs:
            consumers[tensor].append(node)
    found = []
    for softmax in (n for n in graph.nodes if n.op_type == "Softmax"):
        pattern = _match(softmax, graph, producer, consumers)
        if pattern is not None:
            found.append(pattern)
    return found


def _match(softmax: Node, graph: Graph, producer, consumers) -> Pattern | None:
    scores = graph.shapes.get(softmax.inputs[0])
    default_axis = 1 if graph.opset < 13 else -1   # Softmax's default changed at 13
    if scores is None or len(scores) < 3 or \
            softmax.attrs.get("axis", default_axis) % len(scores) != len(scores) - 1:
        return None
    chain = [softmax]
    tensor = softmax.inputs[0]
    node = producer.get(tensor)
    while node is not None and node.op_type in BEFORE_SOFTMAX:
        if len(consumers[tensor]) != 1:
            return None
        chain.insert(0, node)
        # The scores are the operand of the scores' shape that comes from the chain.
        tensor = next((t for t in node.inputs if graph.shapes.get(t) == scores and
                       producer.get(t) is not None and
                       producer[t].op_type in BEFORE_SOFTMAX | {"MatMul"}), None)
        node = producer.get(tensor) if tensor else None
    if node is None or node.op_type != "MatMul" or len(consumers[tensor]) != 1:
        return None
    qk = node
    tensor = softmax.outputs[0]
    while True:
        users = consumers[tensor]
        if len(users) != 1:
            return None
        node = users[0]
        if node.op_type not in AFTER_SOFTMAX:
            break
        chain.append(node)
        tensor = node.outputs[0]
    if node.op_type != "MatMul" or node.inputs[0] != tensor:
        return None
    fields = _fields(graph, qk, node, scores)
    return None if fields is None else Pattern((qk, *chain, node), fields)


def _fields(graph: Graph, qk: Node, pv: Node, scores: tuple[int, ...]) -> dict | None:
    q, k = graph.shapes.get(qk.inputs[0]), graph.shapes.get(qk.inputs[1])
    v = graph.shapes.get(pv.inputs[1])
    if q is None or k is None or v is None or len(q) != len(scores):
        return None
    heads, q_len, kv_len, head_dim = scores[-3], scores[-2], scores[-1], q[-1]
    kv_heads = k[-3] if len(k) == len(scores) else 1
    v_heads = v[-3] if len(v) == len(scores) else 1
    if v[-1] != head_dim or v[-2] != kv_len or k[-2] != head_dim or \
            kv_heads != v_heads or heads % kv_heads:
        return None
    return {"layer_type": "attention", "kind": "attention", "batch": numel(scores[:-3]),
            "heads": heads, "kv_heads": kv_heads, "q_len": q_len, "kv_len": kv_len,
            "head_dim": head_dim}
