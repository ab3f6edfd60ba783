"""rewards_lab: a rewards service on a double-entry ledger over DuckDB, and the notebook lab around it."""

__version__ = "0.1.0"
__all__ = ["__version__"]
