"""contract layer."""
