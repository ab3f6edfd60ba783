"""The replay engine: a programme run over a history of events, without a live service."""
