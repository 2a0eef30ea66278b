// Package stripefake is a stateful, in-memory emulator of the subset of the
// Stripe PaymentIntents API that paymentsd uses. It is meant to be driven by
// the real stripe-go client over HTTP (point STRIPE_API_BASE, or
// stripe.BackendConfig.URL, at it), either in-process through
// httptest.NewServer(stripefake.New(...)) or as a standalone process via
// ListenAndServe.
//
// # Stripe behaviour emulated
//
//   - Authentication: every /v1 request needs "Authorization: Bearer sk_..."
//     (HTTP basic auth with the key as user name works too); otherwise 401.
//   - POST /v1/payment_intents with the test payment methods pm_card_visa,
//     pm_card_mastercard, pm_card_amex (succeed), pm_card_chargeDeclined,
//     pm_card_chargeDeclinedInsufficientFunds, pm_card_chargeDeclinedLostCard
//     and pm_card_chargeDeclinedStolenCard (402 card_error, the PaymentIntent
//     is still created in status requires_payment_method). Any other payment
//     method is a 400 resource_missing and creates nothing.
//   - GET /v1/payment_intents/{id}: strongly consistent.
//   - GET /v1/payment_intents: newest first (reverse creation order, so ties
//     within one second page deterministically), filtered by created (an
//     integer, or created[gt], [gte], [lt], [lte] in Unix seconds), paged by
//     limit (1-100, default 10) and the starting_after / ending_before
//     cursors (an unknown id is a 400 resource_missing; both at once a 400),
//     answering {"object":"list","data":[...],"has_more":...,"url":...}.
//     Strongly consistent. Unknown parameters are a 400 parameter_unknown.
//   - GET /v1/payment_intents/search, newest first, paged by next_page. Like
//     Stripe's, it lags writes: with Options.SearchLag (or Chaos.SearchLag)
//     a PaymentIntent is found only once that long has passed since its
//     creation, by the Options.Now clock. Stripe documents under a minute
//     normally and up to an hour during outages, and warns against search in
//     read-after-write flows; use retrieve or list there.
//   - Idempotency: results of POST requests carrying an Idempotency-Key are
//     saved per (API key, idempotency key) together with a hash of the
//     parameters, once the endpoint started executing. That includes 402
//     declines, 400 resource_missing answers and 500s. Replays are answered
//     byte for byte with "Idempotent-Replayed: true" and an
//     "Original-Request" header; a key reused with other parameters gets a 400
//     {"error":{"type":"idempotency_error","message":...}}, and a key whose
//     first request is still executing gets a 409 idempotency_key_in_use.
//     Validation errors detected before execution (missing amount, bad
//     currency, ...) are not saved. Saved results expire after
//     Options.IdempotencyTTL (24h by default), like Stripe's.
//   - Work outlives the client: once a create starts executing it runs in
//     its own goroutine and creates and saves its result even if the client
//     disconnects or its request context is cancelled; until then the key is
//     in use. Serve waits for such executions when it shuts down.
//
// Differences from real Stripe, on purpose: search is strongly consistent
// unless a lag is configured, only the query forms metadata['k']:'v',
// status:'s', currency:'c' and amount:n joined by AND are understood,
// PaymentIntents have no customer (list with customer=... is empty) and are
// visible to every API key, and only create, retrieve, list and search are
// implemented.
//
// # Faults
//
// Inject queues faults that the next create requests take one each (FIFO);
// SetChaos draws faults at random for every create. Only create requests that
// reach execution take a fault: idempotent replays, idempotency errors and
// requests failing validation do not. The kinds (see FaultKind) are latency,
// 500 (nothing created), lost_answer (created, connection dropped), hang
// (abandoned if the client leaves), and the three Stripe documents:
// 500_charged (created and confirmed, answered and saved as a 500),
// idempotency_error (a 400 without executing, nothing saved) and
// outlive_client (a latency past the client's timeout; the PaymentIntent is
// created anyway).
//
// # Admin endpoints
//
// For the standalone process, unauthenticated endpoints under /_fake/ expose
// the same controls: GET /_fake/stats, GET /_fake/payment_intents,
// POST /_fake/faults (inject faults by kind name, set chaos probabilities,
// latencies and search_lag_ms) and POST /_fake/release (see admin.go).
package stripefake
