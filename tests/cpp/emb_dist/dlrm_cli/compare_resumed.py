"""Compares a resumed strata-dlrm run's --json with the uninterrupted run's (run_dlrm_cli.sh
resume): the resumed run's train losses (one per progress line) must equal, bit for bit, the last
ones of the uninterrupted run."""
import json
import sys

whole, rest = (json.load(open(path)) for path in sys.argv[1:3])
tail = whole["train_loss"][len(whole["train_loss"]) - len(rest["train_loss"]):]
print("uninterrupted:", whole["train_loss"])
print("resumed:      ", rest["train_loss"])
sys.exit(0 if rest["train_loss"] and len(rest["train_loss"]) < len(whole["train_loss"]) and rest["train_loss"] == tail
         else 1)
