"""Workload plug-ins for bench/compare.py: one module per workload, each defining WORKLOAD
(a harness.core.Workload). ALL lists them in the order `--all` runs them."""
import importlib

NAMES = ["limits", "ops", "train", "migration", "remat", "emb", "dlrm", "gpt"]


def load(name):
    if name not in NAMES:
        raise KeyError(f"unknown workload '{name}'; known: {', '.join(NAMES)}")
    return importlib.import_module(f"workloads.{name}").WORKLOAD
