"""One router per resource: schedule, the API's own docs, health, node, model, profiles."""

from service.api.routers import docs, health, model, node, profiles, schedule

#: in this order in the app, and so in the OpenAPI document
ROUTERS = (schedule.router, docs.router, health.router, node.router, model.router, profiles.router)
