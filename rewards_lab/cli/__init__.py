"""The `rewards-lab` command line."""
