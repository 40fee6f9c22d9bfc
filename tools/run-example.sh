#!/usr/bin/env bash
# `make run`: the main job on a real example. Grows as the product does: today it shows the node
# and, when the planner exists, the plan for the example window.
set -euo pipefail
cd "$(dirname "$0")/.."
C=.venv/bin/cosched
echo "== this node (cosched node) =="
$C node
