"""Background work inside the server process: the event worker, the event intake and webhook delivery."""
