"""Compiled kernels: the lazy njit wrapper, the ahead-of-time kernel library, its build
(accsim compile) and the table of kernels it holds."""
