"""The benchmark runner behind bench/run.py: build, servers, workloads, report."""
