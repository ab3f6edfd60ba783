"""The replay's two executors behind one interface (`base.Executor`): DuckDB on this machine, Spark anywhere."""
