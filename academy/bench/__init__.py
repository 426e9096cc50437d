"""Benchmark harness: specs, runner (GPU), peers, results files, rendering."""
