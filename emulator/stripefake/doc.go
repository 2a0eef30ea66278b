// Package stripefake is a stateful, in-memory emulator of the subset of the
// Stripe PaymentIntents and Refunds APIs that paymentsd uses. It is meant to be driven by
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
//     pm_card_mastercard, pm_card_amex, pm_card_pendingRefund,
//     pm_card_refundFail (succeed), pm_card_chargeDeclined,
//     pm_card_chargeDeclinedInsufficientFunds, pm_card_chargeDeclinedLostCard
//     and pm_card_chargeDeclinedStolenCard (402 card_error, the PaymentIntent
//     is still created in status requires_payment_method). Any other payment
//     method is a 400 resource_missing and creates nothing.
//   - Asynchronous settlement: pm_card_processing, the emulator's own
//     (Stripe's cards settle at once), leaves the PaymentIntent processing,
//     as Stripe shows asynchronous payment methods (its charge pending,
//     nothing received, nothing to refund or dispute), until
//     Server.SetPaymentIntentStatus (or POST
//     /_fake/payment_intents/{id}/status) moves it on to succeeded or to requires_payment_method with a decline
//     in last_payment_error, sending payment_intent.succeeded or
//     payment_intent.payment_failed. Retrieve and list show the status at
//     once, search after its lag.
//   - Authorize now, capture later: capture_method=manual (on create;
//     automatic and automatic_async, the default, capture at once, and
//     every PaymentIntent shows its capture_method) confirms to
//     requires_capture, amount_capturable the amount, nothing received,
//     the charge captured false, and sends
//     payment_intent.amount_capturable_updated. POST
//     /v1/payment_intents/{id}/capture, with an optional amount_to_capture
//     (at most amount_capturable, else a 400 invalid_request_error
//     amount_too_large), succeeds it: amount_received what was captured,
//     amount_capturable 0, the rest released (the charge's
//     amount_captured, and its amount_refunded counting the release), and
//     sends payment_intent.succeeded; refunds then take at most
//     amount_received. POST /v1/payment_intents/{id}/cancel (optional
//     cancellation_reason: abandoned, duplicate, fraudulent,
//     requested_by_customer) cancels a PaymentIntent that is
//     requires_payment_method, requires_confirmation or requires_capture
//     (its hold released: the charge refunded), with canceled_at, and
//     sends payment_intent.canceled. A capture of a PaymentIntent that is
//     not requires_capture, or a cancel of one that is succeeded,
//     canceled or processing, is a 400 invalid_request_error with code
//     payment_intent_unexpected_state, Stripe's message and the
//     PaymentIntent in the error's payment_intent. An authorization not
//     captured within Options.AuthorizationWindow (7 days by default, like
//     Stripe's; cmd/stripefake --authorization-window) of its creation is
//     canceled by the emulator, cancellation_reason automatic, with
//     payment_intent.canceled; the window follows the server's clock, so
//     Advance runs it out (see capture.go and authorizations.go).
//   - Parameters: a write (a create of a PaymentIntent or a refund, a capture,
//     a cancel) with a parameter Stripe's API (version 2024-06-20) does not
//     know for it is a 400 invalid_request_error, code parameter_unknown, param
//     naming it, "Received unknown parameter: foo"; one it knows but the
//     emulator does not model (shipping, receipt_email, ...) is accepted and
//     ignored. A currency Stripe does not support (currency=zzz; any case of a
//     supported one is lowercased) is a 400 invalid_request_error on param
//     currency without a code, "Invalid currency: zzz. Stripe currently
//     supports these currencies: usd, aed, ...", as Stripe answers. Both are
//     validation failures: nothing is made, no fault is taken, the idempotency
//     key is not saved. A capture's or a cancel's metadata, statement
//     descriptors, application fee, transfer_data and final_capture are
//     accepted and, but for metadata (updated as Stripe updates it), ignored.
//   - GET /v1/payment_intents/{id}: strongly consistent.
//   - Expanding the latest charge: create and retrieve with
//     expand[]=latest_charge, list and search with data.latest_charge,
//     render it as a charge object whose amount_refunded counts succeeded
//     and pending refunds and whose refunded is true once all of it is.
//     Other expansions are accepted and ignored.
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
//     creation, by the server's clock. Stripe documents under a minute
//     normally and up to an hour during outages, and warns against search in
//     read-after-write flows; use retrieve or list there. With
//     Options.SearchRate it is rate limited as Stripe's is (20 a second
//     per account): a search beyond the rate, by the server's clock, is a
//     429 rate_limit, which stripe-go does not retry.
//   - POST /v1/refunds with payment_intent (or charge, the PaymentIntent's
//     latest), an optional amount (default: all that remains refundable),
//     reason (duplicate, fraudulent or requested_by_customer) and
//     metadata. Validation failures (no payment_intent, amount not a
//     positive integer, another reason) are 400s before execution. Executed
//     refusals, all 400 invalid_request_error: an unknown PaymentIntent or
//     charge (resource_missing); a PaymentIntent that did not succeed
//     (charge_not_refundable, "This PaymentIntent (pi_...) does not have a
//     successful charge to refund."); a charge with a dispute that says
//     is_charge_refundable false, as every dispute OpenDispute opens does
//     (needs_response: a chargeback, the money taken back already),
//     whatever the amount (charge_disputed, no param, "Charge ch_... has
//     been charged back; cannot issue a refund."); nothing left
//     (charge_already_refunded, "Charge ch_... has already been
//     refunded."); more than is left
//     (amount_too_large, "Refund amount ($20.00) is greater than charge
//     amount ($12.34)", or "... unrefunded amount on charge ($2.34)" after
//     earlier refunds). Pending refunds count as refunded, failed ones not.
//     The codes charge_not_refundable and amount_too_large are the closest
//     Stripe documents; Stripe's own answers to these refusals have been
//     seen without a code, so clients should not rely on the code alone.
//   - Refund statuses: succeeded at once, except for pm_card_pendingRefund
//     (pending until moved on) and pm_card_refundFail (answered succeeded,
//     failed with expired_or_canceled_card on every later read), as Stripe
//     documents; Server.SetRefundOutcome overrides that per PaymentIntent
//     and Server.SetRefundStatus moves a refund on (pending to succeeded or
//     failed, succeeded to failed) where Stripe's network would, later.
//   - GET /v1/refunds/{id}, and GET /v1/refunds filtered by payment_intent,
//     charge and created, paged like the PaymentIntent list; both strongly
//     consistent.
//   - Time: the server's clock is Options.Now (time.Now by default) plus what
//     Server.Advance added; creation times, events, search lag, idempotency
//     expiry and the authorization window all go by it, so a test moves "five
//     minutes later" with Advance instead of sleeping. Server.Backdate moves
//     one PaymentIntent's creation earlier: list's created filters and order,
//     its charge and its search lag follow (see clock.go).
//   - Idempotency: results of POST requests carrying an Idempotency-Key are
//     saved per (API key, idempotency key) together with a hash of the
//     parameters, once the endpoint started executing. That includes 402
//     declines, 400 resource_missing answers and 500s. Replays are answered
//     byte for byte with "Idempotent-Replayed: true" and an
//     "Original-Request" header; a key reused with other parameters, or on
//     another endpoint (a PaymentIntent key for a refund), gets a 400
//     {"error":{"type":"idempotency_error","message":...}}, and a key whose
//     first request is still executing gets a 409 idempotency_key_in_use.
//     Captures and cancels are saved and replayed the same way; a key is
//     bound to the path it was first used on, so a key that captured one
//     PaymentIntent is a 400 idempotency_error on another.
//     Validation errors detected before execution (missing amount,
//     unsupported currency, unknown parameter, ...) are not saved. Saved
//     results expire after Options.IdempotencyTTL (24h by default), like
//     Stripe's.
//   - Work outlives the client: once a write (a create, a capture, a cancel)
//     starts executing it runs in its own goroutine and executes and saves its
//     result even if the client disconnects or its request context is
//     cancelled; until then the key is in use. Serve waits for such executions
//     when it shuts down.
//
// Conformance: every answer (objects, lists, search results, error bodies)
// and every event's data.object has the shape Stripe's OpenAPI spec gives
// it, nested objects included: an expanded latest_charge (with
// billing_details and disputed), last_payment_error's payment_method (with
// billing_details and created), a dispute's evidence and evidence_details.
// conformance_test.go checks it against the spec stripe-mock v0.162.0
// embeds (see spec_test.go for why that version).
//
// Differences from real Stripe, on purpose: search is strongly consistent
// unless a lag is configured and unlimited unless a rate is, only the
// query forms metadata['k']:'v', status:'s', currency:'c' and amount:n, up
// to ten joined by AND or by OR (never both, as Stripe's query language
// has it), are understood,
// PaymentIntents have no customer (list with customer=... is empty),
// PaymentIntents and refunds are visible to every API key, and only create,
// retrieve, list, search, capture and cancel of PaymentIntents and create,
// retrieve and list of refunds are implemented: no confirm or update of a
// PaymentIntent, no /v1/charges, no refund update or cancel, no /v1/events
// (events are sent as webhooks only, and listed by an admin endpoint).
// Pending refunds never settle by themselves, and refunds are never
// requires_action or canceled (cards never are). Manual capture has no
// multicapture, overcapture or incremental authorization, a capture below
// the currency's minimum charge is not refused, the release of what was
// not captured is no refund object (only the charge's amount_refunded
// counts it, and no charge.* event is sent), and an authorization is
// canceled after the same window whatever the card brand.
//
// # Webhooks
//
// With Options.WebhookURL and WebhookSecret (cmd/stripefake --webhook-url U
// --webhook-secret S) every state change is a Stripe event, signed as Stripe
// signs them (Stripe-Signature: t=...,v1=...) and POSTed asynchronously,
// retried with backoff until answered 2xx: payment_intent.created,
// payment_intent.processing, payment_intent.succeeded (also on capture),
// payment_intent.payment_failed (also when a processing PaymentIntent settles),
// payment_intent.amount_capturable_updated (authorized, manual capture),
// payment_intent.canceled (a cancel, or an authorization not captured in time),
// refund.created, refund.updated and charge.dispute.created (OpenDispute). A
// refund.updated carries data.previous_attributes, Stripe's record of what
// changed: each attribute whose value changed, with its value before (e.g.
// {"status":"pending"}), null for one the object did not show before. Chaos
// adds Stripe's delivery faults: delayed, duplicated, reordered, and a first
// attempt lost. See webhooks.go.
//
// # Faults
//
// Inject queues faults that the next writes take one each (FIFO); SetChaos
// draws faults at random for every write. The writes are creates of
// PaymentIntents and of refunds, captures and cancels: they draw from the
// same queue and the same chaos, in the order they arrive, except that a
// fault given an Op (Fault.Op, "op" on the admin endpoint: e.g.
// capture_payment_intent) waits for a write of that kind. Retrieves, lists
// and searches never take a fault. Only writes that reach execution take a
// fault: idempotent replays, idempotency errors, keys in use and requests
// failing validation do not (refusals such as an over-refund or a capture
// of a succeeded PaymentIntent are executed, so they do). The kinds (see
// FaultKind) are latency, 500 (nothing done), lost_answer (done,
// connection dropped), hang (abandoned if the client leaves), and the three
// Stripe documents: 500_charged (done, e.g. "a 500 that did refund" or "a
// 500 that did capture", answered and saved as a 500), idempotency_error
// (a 400 without executing, nothing saved) and outlive_client (a latency
// past the client's timeout; the write takes place anyway).
//
// # Admin endpoints
//
// For the standalone process, unauthenticated endpoints under /_fake/ expose
// the same controls: GET /_fake/stats, GET /_fake/payment_intents,
// POST /_fake/faults (inject faults by kind name, optionally for one op,
// set chaos probabilities, latencies and search_lag_ms) and
// POST /_fake/release (see admin.go); GET /_fake/refunds,
// POST /_fake/refunds/{id}/status
// ({"status":"succeeded"|"failed","failure_reason":...}) and
// POST /_fake/payment_intents/{id}/refund_outcome (a RefundOutcome; see
// admin_refunds.go); POST /_fake/payment_intents/{id}/status
// ({"status":"succeeded"|"requires_payment_method","decline_code":...}:
// SetPaymentIntentStatus, see processing.go); GET /_fake/events (every
// event and its deliveries; ?type= and ?object_id= filter), POST /_fake/disputes
// ({"payment_intent":...,"reason":...}: OpenDispute) and GET /_fake/disputes
// (see disputes.go).
package stripefake
