"""Interop and insight: ONNX export (onnx.py) and the query-norm / entropy diagnostic (diagnose.py)."""
