"""Request-level serving simulation (DESIGN.md section 10).

Arrivals, routing (global scheduler), batching (replica scheduler) and the KV-cache
allocator are small policies registered by name; the SimPy processes in `engine` only
move requests between them; `metrics` collects what happened beside the loop; and every
iteration's duration and energy come from a cost model (`cost`, `llm_cost`) that calls
the operator simulator through `simulator.simulate.simulate`.
"""
