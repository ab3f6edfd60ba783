"""The live reward engine: the rule book, event processing, limits, reversals, lots, expiry and simulation."""
