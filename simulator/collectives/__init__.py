"""Collectives as the runtimes run them (DESIGN.md section 22): the wiring a group of
chips has and where the group sits on it (wiring), the algorithms per dimension and
their chaining (algorithms), and the one cost every caller asks (cost)."""
