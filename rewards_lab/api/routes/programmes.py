"""Reward programmes, their versions and rules, and rule simulation."""

from __future__ import annotations

from rewards_lab.api.routes._binding import Endpoint, serve
from rewards_lab.contract.operations import operation
from rewards_lab.service import programme_lifecycle, programmes, simulation

assert operation("list_programmes").sorts == programmes.PROGRAMME_SORTS

BINDINGS: dict[str, Endpoint] = dict(
    [
        serve("create_programme", programmes.create_programme),
        serve("list_programmes", programmes.list_programmes),
        serve("get_programme", programmes.get_programme),
        serve("update_programme", programme_lifecycle.update_programme),
        serve("deactivate_programme", programme_lifecycle.deactivate_programme),
        serve("activate_programme", programme_lifecycle.activate_programme),
        serve("list_versions", programmes.list_versions),
        serve("publish", programmes.publish),
        serve("restore_version", programme_lifecycle.restore_version),
        serve("create_rule", programmes.create_rule),
        serve("get_rule", programmes.get_rule),
        serve("update_rule", programmes.update_rule),
        serve("delete_rule", programmes.delete_rule),
        serve("simulate_rule", simulation.simulate_rule),
        serve("simulate_programme", simulation.simulate_programme),
    ]
)
