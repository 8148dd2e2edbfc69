"""Compares the --json files of strata-dlrm runs at several rank counts (run_dlrm_cli.sh bitwise):
the train losses at every progress line, the last test pass's metrics (17 digits: bit for bit) and
the iterations must be equal; each file must hold one "ranks" entry per rank."""
import json
import sys

runs = [json.load(open(path)) for path in sys.argv[1:]]
first = runs[0]
ok = True
for path, run in zip(sys.argv[1:], runs):
    if len(run["ranks"]) != run["world_size"]:
        print(f"{path}: {len(run['ranks'])} rank entries for world size {run['world_size']}")
        ok = False
    for key in ("train_loss", "test_exact", "iterations", "loss_first", "loss_last"):
        if run[key] != first[key]:
            print(f"{path}: {key} {run[key]} != {first[key]} ({sys.argv[1]})")
            ok = False
    print(f"{path}: {run['world_size']} ranks, losses {run['train_loss']}, test {run['test_exact']}")
if not first["train_loss"] or first["test_exact"]["auc"] is None:
    print("no losses or no test pass to compare")
    ok = False
sys.exit(0 if ok else 1)
