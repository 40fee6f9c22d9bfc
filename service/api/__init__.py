"""The HTTP service (FastAPI): ``main.create_app`` builds it, one router per resource under ``routers/``."""
