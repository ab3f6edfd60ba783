"""The replay plan: each step written once, in one SQL dialect, for both engines."""
