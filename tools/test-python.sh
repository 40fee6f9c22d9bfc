#!/usr/bin/env bash
# The Python tests. First, alone, the few that need every CPU free of the suite's own work (marker whole_machine);
# then two pytest processes side by side, so that one's waiting is the other's time: the Slurm tests (a real local
# cluster: they mostly wait on its daemons), the runner's (real programs started, pinned and waited for) and, to even
# the two out, the set learner's SAC runs (CPU-bound, about two minutes) in one, all the others in the other. Each
# one's output is shown whole; the run fails if any part fails. Arguments are pytest options given to every part
# (e.g. -x); to run some tests only, call .venv/bin/pytest itself.
set -uo pipefail
cd "$(dirname "$0")/.."
side=(tests/slurm tests/runner tests/training/test_set_sac.py)
.venv/bin/pytest -q -p no:cacheprovider -m whole_machine "$@"
alone=$?
[ "$alone" -eq 2 ] && exit 2  # interrupted: pytest handled the SIGINT itself, so the shell would go on
[ "$alone" -eq 5 ] && alone=0  # 5: nothing selected
log=$(mktemp)
# Job control on for the background run only: its own process group with SIGINT not ignored, so that an interrupt
# reaches it too and its teardown stops the cluster's daemons.
set -m
.venv/bin/pytest -q -p no:cacheprovider -m "not whole_machine" "${side[@]}" "$@" >"$log" 2>&1 &
side_pid=$!
set +m
trap 'kill -INT -- "-$side_pid" 2>/dev/null' INT TERM
.venv/bin/pytest -q -m "not whole_machine" "${side[@]/#/--ignore=}" "$@"
rest=$?
wait "$side_pid"
side_rc=$?
echo "--- ${side[*]} (run beside the others):"
cat "$log"
rm -f "$log"
exit $(( alone != 0 || rest != 0 || side_rc != 0 ))
