"""Finding tilings (DESIGN.md section 1, the search wing, above lowering and the
engines, below simulate): `resolve` walks a plan over a workload into resolved
(operator, tiling, fused operator) triples, filling a plan's open fields from `default`
(the memoised default search); `operator` and `bounds` search one operator's tilings,
`workload` maps a whole workload (`accsim map`), `tables` prints its answer."""
