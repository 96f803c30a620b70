"""Small example inputs for the importers (an ONNX graph, a PyTorch profiler trace), so
every command the documentation shows runs on shipped files; SOURCE.md says how each
was made and LICENSE covers them."""
