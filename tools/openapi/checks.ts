// What a client generated from api/openapi.yaml by openapi-typescript must
// say, checked by `tsc --noEmit` in `make lint-openapi`. Real answers are
// checked against the same types in .tmp/openapi/answers.ts, which the
// contract tests write.
import type { components, paths } from "../../.tmp/openapi/paymentsd";

type CardDeclined = components["schemas"]["CardDeclinedProblem"];

// A card-declined problem always names its payment and its decline code.
export const declined: CardDeclined = {
  type: "https://paymentsd.dev/problems/card-declined",
  title: "Card declined",
  status: 402,
  detail: "Your card was declined.",
  payment_id: "pay_06h1s0zdkdwhqcjse51dmdhapg",
  decline_code: "generic_decline",
};
export const paymentID: string = declined.payment_id;
export const declineCode: string = declined.decline_code;

// @ts-expect-error: payment_id and decline_code are required, not optional.
export const declinedWithoutIDs: CardDeclined = {
  type: "https://paymentsd.dev/problems/card-declined",
  title: "Card declined",
  status: 402,
  detail: "Your card was declined.",
};

// GET /openapi.yaml answers the document as text.
export const document: paths["/openapi.yaml"]["get"]["responses"][200]["content"]["application/yaml"] = "openapi: 3.1.0\n";

// Every answer names its request: Request-Id is a declared header.
export const requestID: paths["/payments"]["post"]["responses"][201]["headers"]["Request-Id"] = "req_8d9044fc1feaf808967b810e";
export const problemRequestID: components["responses"]["StoreUnavailable"]["headers"]["Request-Id"] = "req_8d9044fc1feaf808967b810e";

// A payment's description may be null, and a request may leave it out.
export const request: components["schemas"]["CreatePaymentRequest"] = {
  amount: 2000,
  currency: "usd",
  payment_method: "pm_card_visa",
};
