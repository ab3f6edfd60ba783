"""A schemathesis check of the document's own promise (SCHEMATHESIS_HOOKS, from tests/api/test_schemathesis.py).

Some refusals no JSON Schema can express: a cursor the service never issued, an amount with more decimals than the
stored asset allows, a rate with 16 significant digits. The document lists them per operation in
`x-refused-beyond-schema` (code -> the fields it names; `[]` stands for any index, `*` for any field, `name.*` for
any field inside `name`, `name[]*` for anything in an element of the list `name`). The built-in
`positive_data_acceptance` check is told to let a 422 through
(tests/api/test_schemathesis.py's config), and this check takes its place for 422s, strictly: a schema-valid request
may be refused only with a code and field the operation declares there. Any other 422 to a schema-valid request
means the schema says more is valid than the service takes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import schemathesis


def _declared(case: Any) -> dict[str, list[str]]:
    definition = getattr(case.operation, "definition", None)
    raw = getattr(definition, "raw", None) or {}
    declared: dict[str, list[str]] = raw.get("x-refused-beyond-schema", {})
    return declared


@schemathesis.check
def refusal_of_valid_data_is_declared(ctx: Any, response: Any, case: Any) -> bool | None:
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 422:
        return None
    try:
        error = json.loads(response.content)["error"]
    except (ValueError, KeyError, TypeError):
        raise AssertionError(f"422 without the error envelope: {response.content[:300]!r}") from None
    code = error.get("code")
    field = re.sub(r"\[[0-9]+\]", "[]", str(error.get("details", {}).get("field", "")))
    fields = _declared(case).get(code)
    if fields is not None and ("*" in fields or field in fields or field.split(".", 1)[-1] in fields):
        return None
    if fields is not None and any(f.endswith(("].*", ".*", "]*")) and field.startswith(f[:-1]) for f in fields):
        return None  # `attributes.*`: any key of a free-form object; `conditions[]*`: anything in a condition
    raise AssertionError(
        f"a schema-valid request was refused with {code} (field {field or '-'}), which the operation does not "
        f"declare in x-refused-beyond-schema: make the schema say so, or accept the request\n"
        f"{error.get('message')}"
    )
