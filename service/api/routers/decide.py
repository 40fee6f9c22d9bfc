"""POST /decide: a node's state at an event in (running jobs, queue head, Cmax), the decision and its predicted
effect out (``service.decide.decide_state``, the same code the online runner and the Slurm controller call).

Bad state is 422 with one problem ``{field, reason}`` and a one-line ``message`` naming what is wrong and how to fix
it, as POST /schedule reports bad windows. Nothing the service receives is ever executed.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from service.api.deps import State
from service.api.errors import problems_detail
from service.decide import DecideError, DecideRequest, DecideResponse, decide_state

router = APIRouter()


@router.post("/decide", response_model=DecideResponse, summary="a node's state at an event in, the decision out",
             responses={422: {"description": "bad state: the field, what is wrong and how to fix it"}})
def decide(body: DecideRequest, state: State) -> Response:
    # a plain def: FastAPI runs it in a worker thread; the plan lock keeps one decision or plan at a time
    try:
        with state.plan_lock:
            answer = decide_state(state.node, body)
    except DecideError as exc:
        return JSONResponse(problems_detail([{"field": exc.field, "reason": exc.reason, "type": "bad_state"}]),
                            status_code=422)
    return Response(answer.model_dump_json(), media_type="application/json")
