"""A Chakra execution trace (ASTRA-sim's input) with accsim's simulated operator times.

Chakra's schema is mlcommons/chakra schema/protobuf/et_def.proto (package
ChakraProtoMsg): a file holds one GlobalMetadata message then one Node per operation,
each preceded by its length as a varint (the framing chakra's encode_message writes;
src/converter/text_converter.py shows the order). accsim builds the messages it needs
from its own descriptor with the same names and field numbers (a subset: AttributeProto's
name, int64, uint64, bool and string values; Node's id, name, type, data_deps,
duration_micros and attr; GlobalMetadata's version and attr), so `protobuf` is the only
package needed (the `export` extra) and any reader of et_def.proto reads the file.

Nodes: the operators of one iteration of the chip's shard, layer by layer (operators
repeated over the layers are written once per layer), in order, each data-dependent on
the one before, fused as `accsim run` fuses them (simulator.export.profile.fused_units:
a norm, activation or residual add fused into a GEMM has no node, its work is in the
GEMM's): COMP_NODE with duration_micros = its simulated time rounded to whole
microseconds (at least 1), the exact nanoseconds in attribute `accsim_ns`; with T > 1
the tensor-parallel all-reduces as COMM_COLL_NODE (comm_type ALL_REDUCE, comm_size in
bytes) for ASTRA-sim's network model to time. One file per chip (`<name>.<rank>.et`),
the T chips' traces identical.

What ASTRA-sim reads of a node (astra-sim/astra-sim at 518bd51,
astra-sim/workload/Workload.cc and HardwareResource.cc, through Chakra's feeder_v3):
every node's `is_cpu_op`; in replay (`roofline-enabled` 0) a COMP_NODE's
duration_micros; with `roofline-enabled: 1` its `num_ops` and `tensor_size`, the time
being num_ops / min(local-mem-bw x num_ops / tensor_size, peak-perf) (a node with
tensor_size 0 is skipped as invalid). So each COMP_NODE carries num_ops = the
operator's FLOPs (2 per MAC; a vector operator's element operations) and tensor_size =
the bytes accsim's simulation moves to and from off-chip memory, both at least 1.

ASTRA-sim's analytical network refuses fewer than 2 NPUs (astra-network-analytical
NetworkParser: "npus_count should be larger than 1"), so a one-chip trace is written
for two chips running it side by side (no communication between them): each chip's
time is the one chip's. The export also writes ASTRA-sim's other inputs for the chip
(`system.json` replaying the durations, `system_roofline.json` with the chip's peak
and memory bandwidth, `network.yml` of the T chips, `remote_memory.json`). Both system
inputs name, per dimension of the group's wiring, the algorithm accsim's collective model
chose for each collective of the trace (DESIGN.md section 22), and network.yml has
those dimensions.
"""

from __future__ import annotations

import json

from simulator.collectives.cost import collective_cost
from simulator.inputs.platform import Platform
from simulator.errors import AccsimError
from simulator.export.profile import ModelProfile, fused_units
from simulator.mapping.plan import Mapping
from simulator.serving.iteration_cost import OperatorCosts
from simulator.simulate import Inputs, simulate
from simulator.inputs.workload import Workload
from simulator.collectives.wiring import place

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


# ASTRA-sim's analytical network needs at least this many NPUs (see above).
MIN_NPUS = 2


class ComputeFigures:
    """FLOPs (2 per MAC; a vector operator's element operations) and off-chip bytes of
    a fusion unit, from one simulation of its operators together (the edges inside
    it kept), memoised by their shapes."""

    def __init__(self, platform: Platform):
        self.platform = platform
        self._memo: dict[str, tuple[int, int]] = {}

    def unit(self, members: list) -> tuple[int, int]:
        names = {op.name: f"op{i}" for i, op in enumerate(members)}
        ops = [op.model_copy(update={
            "name": names[op.name],
            "inputs": [names[n] for n in op.inputs or () if n in names] or None})
            for op in members]
        key = "".join(op.model_dump_json() for op in ops)
        if key not in self._memo:
            total = simulate(Inputs(self.platform, Workload(name="export", operators=ops),
                                    Mapping()), fusion_report=False).operators_total
            vector = sum(v.rows * v.cols * v.passes * op.repeat for op in ops
                         if op.kind not in ("gemm", "attention") and hasattr(op, "vector")
                         for v in [op.vector()])
            self._memo[key] = (total.model_flops + vector, total.offchip_bytes)
        return self._memo[key]


def unit_nodes(figures: ComputeFigures, units, prefix: str = "") -> list[dict]:
    """One COMP_NODE per carrier of each fusion unit (simulator.export.profile.
    fused_units): its share of the unit's time, FLOPs and bytes, the operators fused
    into it having no node of their own; a collective as COMM_COLL_NODE."""
    nodes = []
    for members, shares, seconds in units:
        if members[0].kind == "collective":
            op = members[0]
            if op.collective not in COLLECTIVE_TYPES:
                raise AccsimError(f"a {op.collective} transfer has no Chakra collective "
                                  "node; the trace writes all-reduce, all-gather, "
                                  "all-to-all and reduce-scatter",
                                  field=f"operators.{op.name}")
            nodes.append({"name": prefix + op.name, "type": COMM_COLL_NODE,
                          "comm_type": COLLECTIVE_TYPES[op.collective],
                          "comm_size": op.payload_bytes * op.repeat})
            continue
        flops, offchip = figures.unit(members)
        for name, share in shares.items():
            nodes.append({"name": prefix + name, "type": COMP_NODE,
                          "ns": round(seconds * share * 1e9),
                          "duration_micros": micros(seconds * share),
                          "num_ops": max(1, round(flops * share)),
                          "tensor_size": max(1, round(offchip * share))})
    return nodes


HEAD = ("final_norm", "lm_head")


def trace_nodes(profile: ModelProfile, prefill, decode) -> list[dict]:
    """The iteration's nodes as plain dicts (name, type, duration or collective),
    layer by layer, then the head (final norm, LM head) once."""
    figures = ComputeFigures(profile.platform)
    units = profile.units(prefill, decode)
    head = [u for u in units if any(op.name in HEAD for op in u[0])]
    layer = [u for u in units if u not in head]
    nodes = []
    for index in range(profile.config.layers):
        nodes += unit_nodes(figures, layer, f"layer{index}.")
    return nodes + unit_nodes(figures, head)


def workload_nodes(platform: Platform, workload: Workload) -> list[dict]:
    """A plain workload's fusion units in order (its repeats included in the
    durations); collectives as COMM_COLL_NODE of their payload."""
    costs = OperatorCosts(platform)

    def alone(op) -> float:
        if op.kind == "collective":
            return 0.0  # timed by ASTRA-sim's network
        single = op.model_copy(update={"inputs": None})
        return costs.workload(Workload(name="export", operators=[single])).seconds

    return unit_nodes(ComputeFigures(platform), fused_units(costs, workload, alone))


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
                              attr(name="num_ops", uint64_val=spec["num_ops"]),
                              attr(name="tensor_size", uint64_val=spec["tensor_size"]),
                              attr(name="accsim_ns", uint64_val=spec["ns"])])
        else:
            node.attr.extend([attr(name="is_cpu_op", bool_val=False),
                              attr(name="comm_type", int64_val=spec["comm_type"]),
                              attr(name="comm_size", int64_val=spec["comm_size"])])
        out.append(framed(node))
    return b"".join(out)


# ASTRA-sim's collective settings for the exported chips: its own example's
# (examples/system/native_collectives/Ring_4chunks.json at 518bd51); the algorithms per
# dimension are those accsim's collective model chose (implementations()).
SYSTEM = {"scheduling-policy": "LIFO", "endpoint-delay": 10,
          "active-chunks-per-dimension": 1, "preferred-dataset-splits": 4,
          "collective-optimization": "localBWAware", "boost-mode": 0}
# accsim's algorithm names -> the implementations ASTRA-sim's system-input parser accepts
# (astra-sim system/astraccl/CollectiveImplLookup.cc).
ASTRA_ALGORITHMS = {"ring": "ring", "direct": "direct",
                    "halving_doubling": "halvingDoubling", "tree": "doubleBinaryTree"}
ASTRA_KEYS = {"all_reduce": "all-reduce-implementation",
              "all_gather": "all-gather-implementation",
              "reduce_scatter": "reduce-scatter-implementation",
              "all_to_all": "all-to-all-implementation"}
# accsim's topology -> ASTRA-sim's analytical one (a 2-D torus as the ring its flat-ring
# collectives run over, drawing on every port: see network_yml).
TOPOLOGIES = {"ring": "Ring", "torus2d": "Ring", "switch": "Switch"}
# A placed wiring dimension's kind -> ASTRA-sim's analytical topology.
PLACED_TOPOLOGIES = {"ring": "Ring", "line": "Ring", "fully_connected": "FullyConnected",
                     "switch": "Switch"}


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


def implementations(platform: Platform, chips: int, nodes: list[dict]) -> dict:
    """Each collective's implementation per dimension, priced at the trace's largest
    payload of that collective (the largest of any, for those it lacks); one ring each
    for a single chip (its side-by-side pair never communicates)."""
    if chips < 2 or platform.interconnect is None:
        return {key: ["ring"] for key in ASTRA_KEYS.values()}
    kinds = {number: kind for kind, number in COLLECTIVE_TYPES.items()}
    sizes: dict[str, int] = {}
    for node in nodes:
        if node["type"] == COMM_COLL_NODE:
            kind = kinds[node["comm_type"]]
            sizes[kind] = max(sizes.get(kind, 0), node["comm_size"])
    largest = max(sizes.values(), default=1)
    return {key: astra_implementations(platform, chips, kind, sizes.get(kind, largest))
            for kind, key in ASTRA_KEYS.items()}


def system_json(platform: Platform, roofline: bool, chosen: dict) -> str:
    """ASTRA-sim's system input: replay (the traces' durations) or its roofline of
    the chip: peak-perf in TFLOP/s at the platform's first input dtype, local-mem-bw
    in GB/s (the off-chip bandwidth); `chosen` the implementations per dimension."""
    dtype = platform.systolic_array.input_dtypes[0]
    config = dict(SYSTEM, **chosen, **{
        "local-mem-bw": platform.offchip.bandwidth_gbps,
        "roofline-enabled": int(roofline),
        "peak-perf": platform.peak_flops_for(dtype) / 1e12})
    return json.dumps(config, indent=4) + "\n"


def network_yml(platform: Platform, npus: int, dimensions: int) -> str:
    """ASTRA-sim's analytical network of `npus` chips, with as many dimensions as the
    collectives' implementations name: the group's placement on the wiring (chips,
    GB/s over the links it drives, hop latency in ns per dimension); or one dimension
    (a ring's link carries ports / 2 of accsim's per-port links, as accsim's flat-ring
    collectives drive every port of a torus)."""
    link = platform.interconnect
    if link is not None and dimensions > 1:
        placed = place(npus, link, platform.clock_hz)
        rows = [(PLACED_TOPOLOGIES[d.kind], d.chips, d.bandwidth_bps / 1e9 * d.ports,
                 d.hop_s * 1e9) for d in placed]
    elif link is None:  # a one-chip trace's side-by-side pair never communicates
        rows = [("Ring", npus, 1.0, 0.0)]
    else:
        ports = link.ports_per_chip // 2 if link.topology == "torus2d" else 1
        rows = [(TOPOLOGIES[link.topology], npus,
                 link.link_bandwidth_gbps * link.efficiency * ports,
                 link.link_latency_cycles / platform.clock_ghz)]
    column = lambda i: ", ".join(f"{row[i]:g}" if i else str(row[i]) for row in rows)  # noqa: E731
    return (f"topology: [ {column(0)} ]\nnpus_count: [ {column(1)} ]\n"
            f"bandwidth: [ {column(2)} ]  # GB/s\nlatency: [ {column(3)} ]  # ns\n")


def chakra_files(nodes: list[dict], description: str, name: str, chips: int,
                 platform: Platform) -> dict[str, bytes | str]:
    """Relative path -> content: one trace per chip of the group, all alike (a
    one-chip trace for two chips side by side), and ASTRA-sim's inputs for them, whose
    collective implementations per dimension are the ones accsim's model chose."""
    data = encode_trace(nodes, description)
    npus = max(chips, MIN_NPUS)
    chosen = implementations(platform, chips, nodes)
    files: dict[str, bytes | str] = {f"{name}.{rank}.et": data for rank in range(npus)}
    files["system.json"] = system_json(platform, False, chosen)
    files["system_roofline.json"] = system_json(platform, True, chosen)
    files["network.yml"] = network_yml(platform, npus,
                                       max(len(v) for v in chosen.values()))
    files["remote_memory.json"] = json.dumps({"memory-type": "NO_MEMORY_EXPANSION"},
                                             indent=4) + "\n"
    return files
