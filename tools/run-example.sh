#!/usr/bin/env bash
# `make run`: the main job on a real example. Shows this node, profiles the example jobs that have no
# profile on this node yet (solo and one-core runs; first use only); on a node with no model of its
# own, calibrates the node model (cosched calibrate, which measures the jobs' interference curves) and trains the agent in it
# (cosched train --node local); then plans and executes the example window with the batch runner and prints
# its measured report (the run directory holds the journal and the picture).
set -euo pipefail
cd "$(dirname "$0")/.."
C=.venv/bin/cosched
WINDOW=examples/window.json

echo "== this node =="
$C node

python3 examples/make-data.py .cosched-example/text.txt

echo
echo "== profiles of the example jobs (made once per node) =="
.venv/bin/python - "$WINDOW" <<'PY'
import json, subprocess, sys
window = json.load(open(sys.argv[1]))
listing = json.loads(subprocess.run([".venv/bin/cosched", "profiles", "list", "--json"], check=True, capture_output=True, text=True).stdout)
have = {p["name"] for p in listing["profiles"]}
for job in window["jobs"]:
    name = job.get("profile") or job["id"]
    if name in have:
        print(f"{name}: stored")
        continue
    print(f"{name}: profiling (solo on the whole node, then on one core)", flush=True)
    subprocess.run([".venv/bin/cosched", "profile", "--name", name, "--", *job["command"]], check=True, stdout=subprocess.DEVNULL)
PY

# A model of this node's own (trained for its id), or the node model's pipeline: calibrate -> train.
read -r NODE_ID MODEL OWN < <(.venv/bin/python - <<'PY'
from env.node.discover import local_node_id
from agent.modelfile import load_set_model
from training.policies import local_model_path, user_models_dir

nid = local_node_id()
path = local_model_path()
own = path.exists() and load_set_model(path).meta.trained_for.node_id == nid
print(nid, path if own else user_models_dir() / f"{nid}.npz", "yes" if own else "no")
PY
)
if [ "$OWN" != yes ]; then
  NODE_MODEL=$(.venv/bin/python -c "from env.calibration.store import model_path; print(model_path('$NODE_ID'))")
  T0=$(date +%s)
  if [ ! -f "$NODE_MODEL" ]; then
    echo
    echo "== no model of this node's own ($NODE_ID): calibrating its node model (microbenchmarks, the jobs' stored curves, a few co-run probes) =="
    $C calibrate --probes 6 --heldout 4 --repeats 3
  else
    echo
    echo "== node model of this node: $NODE_MODEL (cosched calibrate --report shows its error) =="
  fi
  echo
  # Cmax up to this node's CPUs (each co-running job gets CPUs of its own), at most 4
  CMAXES=$(.venv/bin/python -c "import os; print(','.join(str(c) for c in range(1, min(4, os.cpu_count() or 1) + 1)))")
  echo "== training the agent in this node's calibrated model (simulated episodes, a short recipe: 6000 steps, windows of 2-8 jobs, Cmax $CMAXES, a group-cost head on 4000 groups; a few minutes) =="
  mkdir -p "$(dirname "$MODEL")"
  $C train --node local --steps 6000 --windows 2,8 --cmaxes "$CMAXES" --learning-starts 1000 --eval-every 2000 --seed 1 \
    --group-groups 4000 --group-epochs 20 --out "$MODEL"
  echo "calibrate + train: $(( $(date +%s) - T0 )) s"
fi
echo
echo "model: $MODEL"

echo
echo "== plan and execute the example window (cosched run $WINDOW) =="
$C run "$WINDOW" "$@"
