#!/usr/bin/env bash
# Runs a command in each rank with extra arguments for some ranks only, for the mismatch tests of
# run_dlrm_cli.sh. Usage: rank_flag.sh RANKS COMMAND... -- EXTRA...
#   RANKS: a comma-separated list of ranks that get EXTRA appended, cd:DIR to run every rank in
#   DIR/rR, or pid:DIR to write each rank's process id to DIR/rank-R.pid (the fault tests kill or
#   stop one; EXTRA unused for both). The rank is the launcher's (OMPI_COMM_WORLD_RANK, else PMI_RANK).
set -euo pipefail
ranks=$1
shift
cmd=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do cmd+=("$1"); shift; done
[ $# -gt 0 ] && shift
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:?no launcher rank variable}}
case $ranks in
  cd:*) cd "${ranks#cd:}/r$rank"; exec "${cmd[@]}" ;;
  pid:*) echo $$ >"${ranks#pid:}/rank-$rank.pid"; exec "${cmd[@]}" ;;  # exec: the rank keeps this id
esac
if [[ ",$ranks," == *",$rank,"* ]]; then exec "${cmd[@]}" "$@"; fi
exec "${cmd[@]}"
