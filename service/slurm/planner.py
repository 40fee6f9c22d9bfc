"""Where the controller's plans come from: in process (service.planning, as ``cosched schedule``) or the
HTTP service's ``POST /schedule`` (``--service URL``)."""

from __future__ import annotations

import os

from env.errors import InputError
from env.plan.models import Plan, Window
from env.plan.stream_plan import GroupsPlan, ScheduleRequest
from service.slurm.controller import Planner, PlannerUnavailable


def in_process(node: str, policy: str | None, model: str | None) -> Planner:
    from env.sim.nodes import load_node
    from service.planning import plan_window

    spec = load_node(node)

    def plan(window: Window) -> Plan:
        return plan_window(window, spec, policy=policy, model=model)

    return plan


def over_http(url: str, timeout_s: float = 30.0) -> Planner:
    import httpx

    base = url.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise InputError(f"--service must be an http:// or https:// URL, not {url!r}")
    token = os.environ.get("COSCHED_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    def plan(window: Window) -> Plan:
        try:
            # Groups asked for by name: the service's default is the mode its node model predicts better.
            body = ScheduleRequest(**window.model_dump(exclude_none=True), mode="groups")
            r = httpx.post(f"{base}/schedule", content=body.model_dump_json(exclude_none=True), headers={
                **headers, "Content-Type": "application/json"}, timeout=timeout_s)
        except httpx.HTTPError as exc:
            raise PlannerUnavailable(f"{base}/schedule: {type(exc).__name__}: {exc}") from None
        if r.status_code >= 500:
            raise PlannerUnavailable(f"{base}/schedule answered {r.status_code}")
        if r.status_code != 200:
            detail = r.text[:300].replace("\n", " ")
            raise InputError(f"{base}/schedule refused the window ({r.status_code}): {detail}")
        plan = GroupsPlan.model_validate_json(r.content)  # a Plan that says its mode and why: the plan is kept
        return Plan.model_validate(plan.model_dump(exclude=set(GroupsPlan.model_fields) - set(Plan.model_fields)))

    return plan
