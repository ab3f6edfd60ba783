"""Background work inside the server process: the event worker (and, later, webhook delivery)."""
