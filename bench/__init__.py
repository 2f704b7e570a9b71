"""Benchmarks: ingest throughput and search latency (run each file as a script)."""
