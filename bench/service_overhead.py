"""The service's own CPU per POST /schedule, planning stubbed out (a fixed plan), in-process: what the HTTP layer costs.

    .venv/bin/python bench/service_overhead.py [--root REPO]     # REPO: another checkout, to compare side by side

Drives the app through httpx's ASGI transport (no sockets: the client's CPU is in the figure, the same for any
app), 200 warm-up requests, then 5 x 1000 W = 6 windows; prints the median CPU ms per request (``process_time``,
so other work on a shared machine counts little) and the spread. Measured side by side (this 2-CPU machine, load
~9, no token): the raw ASGI fast path before the one-route rework 0.62 ms (0.58-0.65), the one FastAPI route
0.76 ms (0.75-0.93); planning a W = 6 window with agent-search takes 17-32 ms of CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(ROOT), help="the checkout whose service is measured (default: this one)")
    args = ap.parse_args()
    sys.path.insert(0, args.root)
    os.environ.setdefault("COSCHED_MODELS_DIR", str(Path(args.root) / ".no-models"))  # greedy: no model is loaded
    import httpx

    import service.planning as planning
    from env.plan.models import Window
    from env.sim.nodes import load_node

    jobs = ["MG", "EP", "CG", "FT", "IS", "SP"]
    body = json.dumps({"jobs": [{"id": f"{p}-{k}", "profile": p, "command": [f"./{p}"]} for k, p in enumerate(jobs)],
                       "max_concurrency": 3}).encode()
    plan = planning.plan_window(Window.model_validate_json(body), load_node("sim:reference"), policy="greedy")
    planning.plan_window = lambda *a, **k: plan  # the HTTP layer alone
    from service.api.main import create_app

    app = create_app("sim:reference")
    headers = {"content-type": "application/json"}

    async def run() -> list[float]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
            for _ in range(200):
                r = await client.post("/schedule", content=body, headers=headers)
                if r.status_code != 200:
                    raise SystemExit(f"service_overhead: POST /schedule answered {r.status_code}: {r.text[:200]}")
            out = []
            for _ in range(5):
                t = time.process_time()
                for _ in range(1000):
                    await client.post("/schedule", content=body, headers=headers)
                out.append(time.process_time() - t)  # seconds for 1000 = ms per request
            return out

    res = asyncio.run(run())
    print(f"{args.root}: CPU ms per POST /schedule (planning stubbed, client included), median of 5 x 1000: "
          f"{statistics.median(res):.3f} (spread {min(res):.3f}-{max(res):.3f}) (measured)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
