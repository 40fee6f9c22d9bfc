#!/usr/bin/env bash
# `make run`: the main job on a real example. Shows this node, profiles the example jobs that have no
# profile on this node yet (first use only), then plans and executes the example window with the
# batch runner and prints its measured report (the run directory holds the journal and the picture).
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

MODEL=$(.venv/bin/python -c "from training.policies import local_model_path; print(local_model_path())")
if [ ! -f "$MODEL" ]; then
  echo
  echo "== no trained model for this node's shape: training one first on the example jobs (real runs; a few minutes) =="
  mkdir -p "$(dirname "$MODEL")"
  $C train --backend real --steps 200 --seed 1 --out "$MODEL"
fi
echo
echo "model: $MODEL"

echo
echo "== plan and execute the example window (cosched run $WINDOW) =="
$C run "$WINDOW" "$@"
