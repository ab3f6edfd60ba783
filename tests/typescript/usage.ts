// Compiled with the generated types by tests/test_contract_artefacts.py (tsc --noEmit --strict): what a client
// writes must type-check, and what the service would refuse must not.
import type { ErrorEnvelope, Operations, RuleCreate } from "../../clients/typescript/rewards-lab";

const customer: Operations["POST /customers"]["body"] = { external_id: "user-42", email: "ada@example.com" };
// @ts-expect-error unknown fields are refused, as the service refuses them (field_unknown)
const unknownField: Operations["POST /customers"]["body"] = { external_id: "user-42", nickname: "Ada" };
// @ts-expect-error external_id is required
const missingField: Operations["POST /customers"]["body"] = { email: "ada@example.com" };

const rule: RuleCreate = {
  program_id: "prg_1",
  event_type: "order.completed",
  conditions: [{ field: "amount", operator: "gte", value: 20 }],
  actions: [{ type: "issue", amount: { per: "amount", rate: 0.05 } }],
};

function customersOnPage(page: Operations["GET /customers"]["response"]): string[] {
  return page.data.map((c) => c.external_id).concat(page.has_more && page.next_cursor ? [page.next_cursor] : []);
}

function balance(response: Operations["GET /wallets/{wallet_id}/balances"]["response"]): string {
  return response.data.balances.map((b) => `${b.balance} ${b.symbol}`).join(", ") + response.meta.request_id;
}

function retryable(failure: ErrorEnvelope): boolean {
  return failure.error.type === "rate_limit_error" || failure.error.type === "service_error";
}

// @ts-expect-error only registered codes exist
const notACode: ErrorEnvelope["error"]["code"] = "no_such_code";

const issueIsFinancial: Operations["POST /assets/{asset_id}/issue"]["idempotent"] = "required";
const loginHasNoPermission: Operations["POST /auth/login"]["permission"] = null;
const session = (r: Operations["POST /auth/login"]["response"]): string => r.data.token + r.data.expires_at;

export {
  balance,
  customer,
  customersOnPage,
  issueIsFinancial,
  loginHasNoPermission,
  missingField,
  notACode,
  retryable,
  rule,
  session,
  unknownField,
};
