package stripefake

import "time"

// evidenceWindow is how long after a dispute opens its evidence is due: a
// week, within the one to three weeks Stripe documents that networks allow.
const evidenceWindow = 7 * 24 * time.Hour

// evidenceFields are the fields of Stripe's dispute evidence hash. A new
// dispute has none staged: each is null.
var evidenceFields = []string{
	"access_activity_log", "billing_address", "cancellation_policy", "cancellation_policy_disclosure",
	"cancellation_rebuttal", "customer_communication", "customer_email_address", "customer_name",
	"customer_purchase_ip", "customer_signature", "duplicate_charge_documentation",
	"duplicate_charge_explanation", "duplicate_charge_id", "product_description", "receipt",
	"refund_policy", "refund_policy_disclosure", "refund_refusal_explanation", "service_date",
	"service_documentation", "shipping_address", "shipping_carrier", "shipping_date",
	"shipping_documentation", "shipping_tracking_number", "uncategorized_file", "uncategorized_text",
}

// noEvidence is the evidence of a dispute nobody answered yet: every field
// null.
func noEvidence() map[string]any {
	ev := make(map[string]any, len(evidenceFields))
	for _, f := range evidenceFields {
		ev[f] = nil
	}
	return ev
}

// evidenceDetails is Stripe's evidence_details hash of a dispute.
type evidenceDetails struct {
	// DueBy is when evidence is due, in Unix seconds.
	DueBy int64 `json:"due_by"`
	// HasEvidence: evidence has been staged (never, in the emulator).
	HasEvidence bool `json:"has_evidence"`
	// PastDue: the last submission came after DueBy.
	PastDue bool `json:"past_due"`
	// SubmissionCount counts evidence submissions.
	SubmissionCount int `json:"submission_count"`
}
