"""Multi-chip systems (DESIGN.md section 14): the interconnect's collectives, the
parallelism plan and its per-chip capacity check, and the sharding of workloads."""
