"""Benchmarks of the research engine on the real stack (`python -m bench.run`); see docs/performance.md."""
