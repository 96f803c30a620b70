"""Design-space sweeps (DESIGN.md section 11): a spec of axes over platform fields, the
points it samples, one pure task per point x workload, executors that launch those
tasks (serial, process pool, Dask), a content-keyed SQLite store that makes sweeps
resumable, and Pareto reports over the stored metrics."""
