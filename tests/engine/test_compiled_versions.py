"""The compiled-version cache's bounds (`service.compiled_versions`): entries and estimated bytes, superseded
versions evicted before live ones, least recently used next."""

from __future__ import annotations

from rewards_lab.contract.scope import Scope
from rewards_lab.engine.rule_book import CompiledVersions

SCOPE = Scope("org_a", "sandbox")


def test_the_cache_is_bounded_by_entries_and_evicts_superseded_versions_first() -> None:
    cache: CompiledVersions[str] = CompiledVersions(max_entries=3, max_bytes=10**9)
    cache.put(SCOPE, "steady-1", "S1", "steady", 1, 10)
    for number in range(1, 9):
        cache.put(SCOPE, f"busy-{number}", f"B{number}", "busy", number, 10)
        assert cache.stats()[0] <= 3
    assert cache.get(SCOPE, "steady-1") == "S1"  # live, and least recently used: superseded ones went first
    assert cache.get(SCOPE, "busy-8") == "B8" and cache.get(SCOPE, "busy-1") is None


def test_the_cache_is_bounded_by_estimated_bytes_least_recently_used_first() -> None:
    cache: CompiledVersions[str] = CompiledVersions(max_entries=100, max_bytes=250)
    for index in range(5):
        cache.put(SCOPE, f"v{index}", f"V{index}", f"programme-{index}", 1, 100)
        assert cache.stats()[1] <= 250
        cache.get(SCOPE, "v0")  # kept in use
    assert cache.stats() == (2, 200)
    assert cache.get(SCOPE, "v0") == "V0" and cache.get(SCOPE, "v4") == "V4"


def test_a_version_larger_than_the_whole_budget_is_still_kept_alone() -> None:
    cache: CompiledVersions[str] = CompiledVersions(max_entries=10, max_bytes=50)
    cache.put(SCOPE, "a", "A", "p", 1, 10)
    cache.put(SCOPE, "huge", "H", "q", 1, 500)
    assert cache.stats() == (1, 500) and cache.get(SCOPE, "huge") == "H"
