"""The benchmark harness behind bench/compare.py: statistics, the interleaved runner, reports.

A workload (bench/workloads/<name>.py) declares items; each item has a Strata side and a peer side
that both return a Run (metadata + raw samples per figure). The runner executes them interleaved
A B A B after a warm-up, refuses to compare runs made under different conditions (thread count,
dtype), and the report module turns the pooled samples into medians, ranges, ratios and fractions of
the machine's measured limits (bench/limits.cpp).
"""
