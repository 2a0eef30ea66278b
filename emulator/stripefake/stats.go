package stripefake

// Stats are the emulator's counters. Replayed answers count only as Replays,
// not again as declines, invalid requests or faults.
type Stats struct {
	// CreateRequests counts authenticated POST /v1/payment_intents requests,
	// replays included (refund creates count in RefundCreateRequests).
	CreateRequests int64 `json:"create_requests"`
	// PaymentIntentsCreated counts PaymentIntents created (declined ones too).
	PaymentIntentsCreated int64 `json:"payment_intents_created"`
	// Replays counts answers served from the idempotency store.
	Replays int64 `json:"replays"`
	// Declines counts executed card declines (402).
	Declines int64 `json:"declines"`
	// InvalidRequests counts invalid_request_error answers (400 and 404),
	// except authentication failures.
	InvalidRequests int64 `json:"invalid_requests"`
	// IdempotencyErrors counts keys reused with different parameters, or on
	// another endpoint than the one they were first used on (400).
	IdempotencyErrors int64 `json:"idempotency_errors"`
	// KeyInUse counts 409 idempotency_key_in_use answers.
	KeyInUse int64 `json:"key_in_use"`
	// Faults500 counts 500s produced by Fault500 or chaos.
	Faults500 int64 `json:"faults_500"`
	// Faults500Charged counts 500s answered after the PaymentIntent or
	// refund was created (Fault500Charged or chaos).
	Faults500Charged int64 `json:"faults_500_charged"`
	// FaultsIdempotencyError counts 400 idempotency_error answers produced by
	// FaultIdempotencyError or chaos (not counted in IdempotencyErrors).
	FaultsIdempotencyError int64 `json:"faults_idempotency_error"`
	// OutliveClients counts requests that took a FaultOutliveClient.
	OutliveClients int64 `json:"outlive_clients"`
	// ClientsGone counts executed writes (creates of PaymentIntents or
	// refunds, captures, cancels) whose client had gone when the result was
	// saved: the write took place, the answer was not delivered.
	ClientsGone int64 `json:"clients_gone"`
	// ExecutingNow is the number of writes (creates of PaymentIntents or
	// refunds, captures, cancels) executing right now, including those whose
	// client has gone.
	ExecutingNow int64 `json:"executing_now"`
	// LostAnswers counts connections dropped by FaultLostAnswer or chaos.
	LostAnswers int64 `json:"lost_answers"`
	// Hangs counts requests that were hung.
	Hangs int64 `json:"hangs"`
	// HungNow is the number of requests hung right now.
	HungNow int64 `json:"hung_now"`
	// Latencies counts requests delayed by a latency (injected or chaos).
	Latencies int64 `json:"latencies"`
	// Unauthorized counts 401 answers.
	Unauthorized int64 `json:"unauthorized"`
	// Searches counts search requests.
	Searches int64 `json:"searches"`
	// SearchesRateLimited counts searches refused with 429 rate_limit
	// (Options.SearchRate); they are not counted in Searches.
	SearchesRateLimited int64 `json:"searches_rate_limited"`
	// SearchesLagged counts searches that left out at least one matching
	// PaymentIntent because it was younger than the search lag.
	SearchesLagged int64 `json:"searches_lagged"`
	// Lists counts list requests, including invalid ones.
	Lists int64 `json:"lists"`
	// Retrieves counts PaymentIntent retrieve requests, including 404s.
	Retrieves int64 `json:"retrieves"`

	// Manual capture (see capture.go and authorizations.go). Captures and
	// cancels draw faults like creates, and those count in the fault
	// counters above; their refusals (a status that does not allow them, an
	// amount above what is capturable, an unknown PaymentIntent) count in
	// InvalidRequests.
	// Authorizations counts PaymentIntents that became requires_capture.
	Authorizations int64 `json:"authorizations"`
	// CaptureRequests counts authenticated POST
	// /v1/payment_intents/{id}/capture requests, replays included.
	CaptureRequests int64 `json:"capture_requests"`
	// Captures counts PaymentIntents captured.
	Captures int64 `json:"captures"`
	// CancelRequests counts authenticated POST
	// /v1/payment_intents/{id}/cancel requests, replays included.
	CancelRequests int64 `json:"cancel_requests"`
	// Cancels counts PaymentIntents canceled by a cancel request.
	Cancels int64 `json:"cancels"`
	// AuthorizationsExpired counts authorizations the emulator canceled at
	// the end of their window (Options.AuthorizationWindow).
	AuthorizationsExpired int64 `json:"authorizations_expired"`

	// RefundCreateRequests counts authenticated POST /v1/refunds requests,
	// replays included. They draw faults like PaymentIntent creates, and
	// those count in the fault counters above.
	RefundCreateRequests int64 `json:"refund_create_requests"`
	// RefundsCreated counts refunds created, whatever their status.
	RefundsCreated int64 `json:"refunds_created"`
	// RefundsRefused counts executed refund creates that Stripe refuses: an
	// unknown PaymentIntent or charge, nothing successful to refund, already
	// refunded, an amount above what remains. They count in InvalidRequests.
	RefundsRefused int64 `json:"refunds_refused"`
	// RefundsFailed counts refunds that became failed.
	RefundsFailed int64 `json:"refunds_failed"`
	// RefundStatusChanges counts refunds moved on by SetRefundStatus or
	// POST /_fake/refunds/{id}/status (no-ops excluded).
	RefundStatusChanges int64 `json:"refund_status_changes"`
	// RefundRetrieves counts refund retrieve requests, including 404s.
	RefundRetrieves int64 `json:"refund_retrieves"`
	// RefundLists counts refund list requests, including invalid ones.
	RefundLists int64 `json:"refund_lists"`

	// Webhooks (with Options.WebhookURL; see webhooks.go).
	// WebhookEvents counts events made, one per state change.
	WebhookEvents int64 `json:"webhook_events"`
	// WebhookAttempts counts delivery attempts: POSTs sent, duplicates and
	// retries included, plus first attempts dropped by PWebhookLost.
	WebhookAttempts int64 `json:"webhook_attempts"`
	// WebhookDelivered counts events answered 2xx at least once.
	WebhookDelivered int64 `json:"webhook_delivered"`
	// WebhookAnswered counts attempts answered 2xx: WebhookDelivered plus
	// the duplicates the endpoint answered.
	WebhookAnswered int64 `json:"webhook_answered"`
	// WebhookRetries counts attempts after a failed one.
	WebhookRetries int64 `json:"webhook_retries"`
	// WebhookFailedAttempts counts attempts not answered 2xx: an error, a
	// timeout, another status, or dropped by PWebhookLost.
	WebhookFailedAttempts int64 `json:"webhook_failed_attempts"`
	// WebhookPending is the number of events not delivered yet.
	WebhookPending int64 `json:"webhook_pending"`
	// WebhookDropped counts events never sent because the queue was full
	// (Options.WebhookQueue).
	WebhookDropped int64 `json:"webhook_dropped"`
	// WebhookDelays, WebhookDuplicates, WebhookReorders and WebhookLost
	// count the webhook faults drawn from chaos.
	WebhookDelays     int64 `json:"webhook_delays"`
	WebhookDuplicates int64 `json:"webhook_duplicates"`
	WebhookReorders   int64 `json:"webhook_reorders"`
	WebhookLost       int64 `json:"webhook_lost"`
	// Disputes counts disputes opened (OpenDispute, POST /_fake/disputes).
	Disputes int64 `json:"disputes"`
}
