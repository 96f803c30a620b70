"""The tile program (the arrays lowering emits and both engines replay) with its validity
checks, whole or streamed block by block."""
