"""The model's arithmetic, in one place: the per-tile timing formulas, the dataflow table
(what os/ws/is keep stationary, stream and drain), number formats and sparsity (DESIGN.md
section 1). Pure functions and tables; nothing here reads a file or knows a workload."""
