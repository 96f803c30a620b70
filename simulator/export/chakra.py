"""A Chakra execution trace (ASTRA-sim's input) with accsim's simulated operator times.

Chakra's schema is mlcommons/chakra schema/protobuf/et_def.proto (package
ChakraProtoMsg): a file holds one GlobalMetadata message then one Node per operation,
each preceded by its length as a varint (the framing chakra's encode_message writes;
src/converter/text_converter.py shows the order). accsim builds the messages it needs
from its own descriptor with the same names and field numbers (a subset: AttributeProto's
name, int64, uint64, bool and string values; Node's id, name, type, data_deps,
duration_micros and attr; GlobalMetadata's version and attr), so `protobuf` is the only
package needed (the `export` extra) and any reader of et_def.proto reads the file.

Nodes: each operator of one iteration of the chip's shard, layer by layer (operators
repeated over the layers are written once per layer), in order, each data-dependent on
the one before: COMP_NODE with duration_micros = its simulated time rounded to whole
microseconds (at least 1), the exact nanoseconds in attribute `accsim_ns`; with T > 1
the tensor-parallel all-reduces as COMM_COLL_NODE (comm_type ALL_REDUCE, comm_size in
bytes) for ASTRA-sim's network model to time. One file per chip (`<name>.<rank>.et`),
the T chips' traces identical; with T > 1 also ASTRA-sim's system input
(`<name>.system.json`) naming per dimension of the group's wiring the algorithm accsim's
collective model chose for each collective of the trace (DESIGN.md section 22).
"""

from __future__ import annotations

import json

from simulator.collectives import collective_cost
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.export.profile import ModelProfile
from simulator.serving.cost import OperatorCosts
from simulator.inputs.workload import Workload

SCHEMA_VERSION = "0.0.4"
# Enum values of et_def.proto.
COMP_NODE, COMM_COLL_NODE = 4, 7
COLLECTIVE_TYPES = {"all_reduce": 0, "all_gather": 2, "all_to_all": 6,
                    "reduce_scatter": 7}
# Field numbers of et_def.proto: (message, [(field, number, type, label, type name)]).
_T = {"string": 9, "int64": 3, "uint64": 4, "bool": 8, "message": 11, "enum": 14}
_MESSAGES = {
    "AttributeProto": [("name", 1, "string"), ("doc_string", 2, "string"),
                       ("int64_val", 9, "int64"), ("uint64_val", 13, "uint64"),
                       ("bool_val", 27, "bool"), ("string_val", 29, "string")],
    "GlobalMetadata": [("version", 1, "string"), ("attr", 2, "message", "AttributeProto")],
    "Node": [("id", 1, "uint64"), ("name", 2, "string"), ("type", 3, "enum", "NodeType"),
             ("ctrl_deps", 4, "uint64", None, True), ("data_deps", 5, "uint64", None, True),
             ("start_time_micros", 6, "uint64"), ("duration_micros", 7, "uint64"),
             ("attr", 10, "message", "AttributeProto")],
}
_NODE_TYPES = {"INVALID_NODE": 0, "METADATA_NODE": 1, "MEM_LOAD_NODE": 2,
               "MEM_STORE_NODE": 3, "COMP_NODE": 4, "COMM_SEND_NODE": 5,
               "COMM_RECV_NODE": 6, "COMM_COLL_NODE": 7}
_ONEOF_VALUES = ("int64_val", "uint64_val", "bool_val", "string_val")
# ASTRA-sim's names of accsim's collective algorithms (astra-sim
# system/astraccl/CollectiveImplLookup.cc) and its system-input key per collective.
ASTRA_ALGORITHMS = {"ring": "ring", "direct": "direct",
                    "halving_doubling": "halvingDoubling", "tree": "doubleBinaryTree"}
ASTRA_KEYS = {"all_reduce": "all-reduce-implementation",
              "all_gather": "all-gather-implementation",
              "reduce_scatter": "reduce-scatter-implementation",
              "all_to_all": "all-to-all-implementation"}


def protobuf_classes() -> tuple[type, type, type]:
    """(GlobalMetadata, Node, AttributeProto) message classes of the schema above."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        raise AccsimError("writing a Chakra trace needs the protobuf package: pip "
                          "install 'accsim[export]'", field="chakra") from None
    proto = descriptor_pb2.FileDescriptorProto(name="accsim_chakra_et.proto",
                                               package="ChakraProtoMsg", syntax="proto3")
    enum = proto.enum_type.add(name="NodeType")
    for name, number in _NODE_TYPES.items():
        enum.value.add(name=name, number=number)
    for message, fields in _MESSAGES.items():
        entry = proto.message_type.add(name=message)
        if message == "AttributeProto":
            entry.oneof_decl.add(name="value")
        for name, number, kind, *more in fields:
            type_name = more[0] if more else None
            repeated = (len(more) > 1 and more[1]) or kind == "message"
            field = entry.field.add(name=name, number=number, type=_T[kind],
                                    label=3 if repeated else 1)
            if type_name:
                field.type_name = f".ChakraProtoMsg.{type_name}"
            if message == "AttributeProto" and name in _ONEOF_VALUES:
                field.oneof_index = 0  # the `value` oneof
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    get = message_factory.GetMessageClass
    return tuple(get(pool.FindMessageTypeByName(f"ChakraProtoMsg.{name}"))
                 for name in ("GlobalMetadata", "Node", "AttributeProto"))


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def framed(message) -> bytes:
    """One message as chakra's encode_message writes it: varint length, then bytes."""
    data = message.SerializeToString(deterministic=True)
    return _varint(len(data)) + data


def micros(seconds: float) -> int:
    """Whole microseconds, at least 1 (a zero-duration node would vanish in ASTRA-sim)."""
    return max(1, round(seconds * 1e6))


def trace_nodes(profile: ModelProfile, prefill, decode) -> list[dict]:
    """The iteration's nodes as plain dicts (name, type, duration or collective),
    layer by layer: the operators before `final_norm` repeat per layer."""
    ops = profile.iteration(prefill, decode).operators
    tail = next(i for i, op in enumerate(ops) if op.name == "final_norm")
    sequence = [(layer, op) for layer in range(profile.config.layers)
                for op in ops[:tail]] + [(None, op) for op in ops[tail:]]
    nodes = []
    for layer, op in sequence:
        name = op.name if layer is None else f"layer{layer}.{op.name}"
        if op.kind == "collective":
            nodes.append({"name": name, "type": COMM_COLL_NODE,
                          "comm_type": COLLECTIVE_TYPES[op.collective],
                          "comm_size": op.payload_bytes})
        else:
            seconds = profile.seconds(op)
            nodes.append({"name": name, "type": COMP_NODE, "ns": round(seconds * 1e9),
                          "duration_micros": micros(seconds)})
    return nodes


def workload_nodes(costs: OperatorCosts, workload: Workload) -> list[dict]:
    """A plain workload's operators in order, one node each (its repeats included in
    the duration); collectives as COMM_COLL_NODE of their payload."""
    nodes = []
    for op in workload.operators:
        if op.kind == "collective":
            if op.collective not in COLLECTIVE_TYPES:
                raise AccsimError(f"a {op.collective} transfer has no Chakra collective "
                                  "node; the trace writes all-reduce, all-gather, "
                                  "all-to-all and reduce-scatter",
                                  field=f"operators.{op.name}")
            nodes.append({"name": op.name, "type": COMM_COLL_NODE,
                          "comm_type": COLLECTIVE_TYPES[op.collective],
                          "comm_size": op.payload_bytes * op.repeat})
            continue
        seconds = costs.workload(Workload(name="export", operators=[
            op.model_copy(update={"inputs": None})])).seconds
        nodes.append({"name": op.name, "type": COMP_NODE, "ns": round(seconds * 1e9),
                      "duration_micros": micros(seconds)})
    return nodes


def encode_trace(nodes: list[dict], description: str) -> bytes:
    """The trace file: GlobalMetadata, then each node depending on the one before."""
    metadata_class, node_class, attr = protobuf_classes()
    out = [framed(metadata_class(version=SCHEMA_VERSION, attr=[
        attr(name="schema", string_val=f"{SCHEMA_VERSION}-accsim"),
        attr(name="accsim_description", string_val=description)]))]
    for index, spec in enumerate(nodes):
        node = node_class(id=index, name=spec["name"], type=spec["type"],
                          data_deps=[index - 1] if index else [])
        if spec["type"] == COMP_NODE:
            node.duration_micros = spec["duration_micros"]
            node.attr.extend([attr(name="is_cpu_op", bool_val=False),
                              attr(name="accsim_ns", uint64_val=spec["ns"])])
        else:
            node.attr.extend([attr(name="is_cpu_op", bool_val=False),
                              attr(name="comm_type", int64_val=spec["comm_type"]),
                              attr(name="comm_size", int64_val=spec["comm_size"])])
        out.append(framed(node))
    return b"".join(out)


def chakra_files(nodes: list[dict], description: str, name: str,
                 chips: int) -> dict[str, bytes]:
    """Relative path -> bytes: one trace per chip of the group, all alike."""
    data = encode_trace(nodes, description)
    return {f"{name}.{rank}.et": data for rank in range(chips)}


def astra_implementations(platform: Platform, chips: int, kind: str,
                          size: int) -> list[str]:
    """ASTRA-sim's implementation per dimension for one collective of `size` bytes over
    `chips`, as accsim's model runs it (`x:ring y:halving_doubling` -> [ring,
    halvingDoubling]; the flat ring of `--collectives ring`: one ring)."""
    cost = collective_cost(kind, size, chips, platform)
    chosen = dict(part.split(":") for part in cost.algorithm.split() if ":" in part)
    names = [chosen[dim] for dim in sorted(chosen, key=_dimension_order)] or ["ring"]
    return [ASTRA_ALGORITHMS[name] for name in names]


def _dimension_order(name: str) -> int:
    return len("xyzwuvst") if name == "scale-out" else "xyzwuvst".index(name)


def system_file(platform: Platform, chips: int, nodes: list[dict],
                name: str) -> dict[str, str]:
    """`<name>.system.json`, ASTRA-sim's system input, for a trace over `chips` > 1:
    each collective's implementation per dimension priced at the trace's largest
    payload of that collective (the largest of any, for those it lacks)."""
    if chips < 2:
        return {}
    kinds = {number: kind for kind, number in COLLECTIVE_TYPES.items()}
    sizes: dict[str, int] = {}
    for node in nodes:
        if node["type"] == COMM_COLL_NODE:
            kind = kinds[node["comm_type"]]
            sizes[kind] = max(sizes.get(kind, 0), node["comm_size"])
    largest = max(sizes.values(), default=1)
    system = {"scheduling-policy": "LIFO", "endpoint-delay": 10,
              "active-chunks-per-dimension": 1, "preferred-dataset-splits": 4,
              **{key: astra_implementations(platform, chips, kind,
                                            sizes.get(kind, largest))
                 for kind, key in ASTRA_KEYS.items()},
              "collective-optimization": "localBWAware",
              "local-mem-bw": platform.offchip.bandwidth_gbps, "boost-mode": 0}
    return {f"{name}.system.json": json.dumps(system, indent=2) + "\n"}
