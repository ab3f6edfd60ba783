"""The tenant scope every request acts in: one organization, one environment."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EnvironmentName = Literal["sandbox", "production"]
ENVIRONMENTS: tuple[EnvironmentName, ...] = ("sandbox", "production")


@dataclass(frozen=True, slots=True)
class Scope:
    organization_id: str
    environment: EnvironmentName

    def __post_init__(self) -> None:
        if self.environment not in ENVIRONMENTS:
            raise ValueError(f"environment must be one of {ENVIRONMENTS}, not {self.environment!r}")

    @property
    def params(self) -> list[str]:
        return [self.organization_id, self.environment]
