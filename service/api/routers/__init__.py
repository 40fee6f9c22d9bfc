"""One router per resource: schedule, decide, the API's own docs, health, node, model, profiles."""

from service.api.routers import decide, docs, health, model, node, profiles, schedule

#: in this order in the app, and so in the OpenAPI document
ROUTERS = (schedule.router, decide.router, docs.router, health.router, node.router, model.router, profiles.router)
