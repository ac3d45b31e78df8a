"""Load benchmarks; each prints JSON lines with its figures."""
