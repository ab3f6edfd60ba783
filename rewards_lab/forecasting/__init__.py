"""Forecasts from a replay, shared by the lab and the service: issuance history, projections, liability, the gate."""
