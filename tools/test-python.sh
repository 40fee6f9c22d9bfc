#!/usr/bin/env bash
# The Python tests as two pytest processes side by side: the Slurm tests (a real local cluster: they mostly wait on
# its daemons) and all the others. Each one's output is shown whole; the run fails if either fails.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
# Job control on for the background run only: its own process group with SIGINT not ignored, so that an interrupt
# reaches it too and its teardown stops the cluster's daemons.
set -m
.venv/bin/pytest -q -p no:cacheprovider tests/slurm "$@" >"$log" 2>&1 &
slurm_pid=$!
set +m
trap 'kill -INT -- "-$slurm_pid" 2>/dev/null' INT TERM
.venv/bin/pytest -q --ignore=tests/slurm "$@"
rest=$?
wait "$slurm_pid"
slurm=$?
echo "--- tests/slurm (run beside the others):"
cat "$log"
rm -f "$log"
exit $(( rest != 0 || slurm != 0 ))
