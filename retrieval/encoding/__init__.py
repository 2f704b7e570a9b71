"""Encoding: text into vectors (MiniLM on ONNX Runtime or torch, its install-time
export) and the optional cross-encoder that reranks."""
