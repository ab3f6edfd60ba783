"""Push and tiers (issue 33): until the server stores tiers (T2) and push plans them (T12), a file with tiers is
refused before anything is read or written, rather than published without them."""

from __future__ import annotations

from typing import Any

import pytest

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import parse_programme
from rewards_lab.lab.push import make_plan
from tests.contract.test_tier_requests import tiered


class Untouchable:
    """A client that fails the test if push reads or writes anything."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"push touched the server ({name})")


def test_a_file_with_tiers_is_refused_before_the_server_is_touched() -> None:
    with pytest.raises(ServiceError) as caught:
        make_plan(parse_programme(tiered()), Untouchable())  # type: ignore[arg-type]
    assert (caught.value.code, caught.value.details["field"]) == ("field_invalid", "programme.tiers")
    untiered = tiered()
    untiered["programme"].pop("tiers")
    untiered["rules"] = untiered["rules"][:1]
    untiered["rules"][0]["actions"][0].pop("multiply")
    with pytest.raises(AssertionError, match="touched the server"):
        make_plan(parse_programme(untiered), Untouchable())  # type: ignore[arg-type]
