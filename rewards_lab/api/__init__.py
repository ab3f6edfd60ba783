"""The /v1 HTTP service: thin FastAPI routes over the service layer."""
