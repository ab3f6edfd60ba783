"""Security: API keys and principals, owner sessions and passwords, login guard, secrets at rest, webhook targets."""
