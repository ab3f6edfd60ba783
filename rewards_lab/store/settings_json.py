"""The JSON columns of settings and records, both ways: the store decodes them into domain types when it reads a
row and encodes them when it writes one, so no layer above sees their JSON.

Settings: a version's `spending`, `guards`, `guard_override` and `tiers`, a rule's `limits`, an asset's `expiry`.
Records of an execution: the cut a cap made (`limited`), the counters it counted in (`usage_keys`) and a reverse
action's detail (`reversal`). Each encoder writes exactly the text the service wrote before these types existed
(rows already stored read back the same), and an empty value is NULL where it always was.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date

from rewards_lab.contract import jsonutil
from rewards_lab.domain.expiry import ExpiryPolicy
from rewards_lab.domain.limits import CapCut, CounterKey, Limit
from rewards_lab.domain.records import ReversalRecord
from rewards_lab.domain.settings import NO_SPENDING, Guard, GuardOverride, Spending, Tiers, guards_of

_NO_LIMITS = (None, "", "[]")


def spending_from(text: str | None) -> Spending:
    """A version's spending settings (NULL: the defaults)."""
    return NO_SPENDING if not text else Spending.of(jsonutil.loads(text))


def spending_text(spending: Spending) -> str | None:
    """NULL for the defaults, as every version stored before the settings existed."""
    return None if spending.is_default else jsonutil.dumps(spending.as_json())


def guards_from(text: str | None) -> tuple[Guard, ...]:
    return guards_of(jsonutil.loads(text)) if text else ()


def guards_text(guards: Sequence[Guard]) -> str | None:
    """NULL when there are none, as every version had before guards existed."""
    return jsonutil.dumps([guard.as_json() for guard in guards]) if guards else None


def tiers_from(text: str | None) -> Tiers | None:
    """A version's tier model (NULL: none)."""
    return Tiers.of(jsonutil.loads(text)) if text else None


def tiers_text(tiers: Tiers | None) -> str | None:
    """NULL without tiers, as every version had before tiers existed."""
    return None if tiers is None else jsonutil.dumps(tiers.as_json())


def override_from(text: str | None) -> GuardOverride | None:
    return GuardOverride.of(jsonutil.loads(text)) if text else None


def override_text(override: GuardOverride) -> str:
    return jsonutil.dumps(override.as_json())


def limits_from(text: str | None) -> tuple[Limit, ...]:
    """A rule's caps (its `limits` column; '[]' or NULL: none)."""
    return () if text in _NO_LIMITS else tuple(Limit.of(item) for item in jsonutil.loads(text or "[]"))


def limits_text(limits: Sequence[Limit]) -> str:
    """As rules have always been written (`json.dumps`, '[]' for none)."""
    return json.dumps([limit.as_json() for limit in limits])


def expiry_from(text: str | None) -> ExpiryPolicy | None:
    """An asset's expiry (NULL: its points never expire)."""
    return ExpiryPolicy.of(jsonutil.loads(text)) if text else None


def expiry_text(policy: ExpiryPolicy | None) -> str | None:
    return None if policy is None else jsonutil.dumps(policy.as_json())


def cut_from(text: str | None) -> CapCut | None:
    """The cap that cut an execution's reward, and by how much (NULL: none did)."""
    if not text:
        return None
    stored = jsonutil.loads(text)
    maximum, count = stored.get("max_amount_minor"), stored.get("max_count")
    return CapCut(
        stored["scope"],
        stored["period"],
        date.fromisoformat(stored["period_start"]),
        None if maximum is None else int(maximum),
        None if count is None else int(count),
        int(stored["cut_minor"]),
    )


def cut_text(cut: CapCut | None) -> str | None:
    """A cut as an execution records it (amounts in minor units)."""
    if cut is None:
        return None
    return jsonutil.dumps(
        {
            "scope": cut.scope,
            "period": cut.period,
            "period_start": cut.period_start.isoformat(),
            "max_amount_minor": cut.max_amount_minor,
            "max_count": cut.max_count,
            "cut_minor": cut.cut_minor,
        }
    )


def keys_from(text: str | None) -> tuple[CounterKey, ...]:
    """The cap and budget counters an execution's reward counted in (NULL: none)."""
    if not text:
        return ()
    return tuple((key[0], key[1], key[2], key[3]) for key in jsonutil.loads(text))


def keys_text(keys: Sequence[CounterKey]) -> str | None:
    return jsonutil.dumps([list(key) for key in keys]) if keys else None


def reversal_from(text: str | None) -> ReversalRecord | None:
    return ReversalRecord.of(jsonutil.loads(text)) if text else None


def reversal_text(record: ReversalRecord | None) -> str | None:
    return None if record is None else jsonutil.dumps(record.as_json())
