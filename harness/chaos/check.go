package chaos

import "fmt"

// maxDetails bounds the violations a check lists; it counts them all.
const maxDetails = 20

// Check is one invariant's verdict.
type Check struct {
	N    int
	Name string
	// Checked is how many things the check looked at.
	Checked int
	// Violations counts every violation; Details lists the first ones.
	Violations int
	Details    []string
}

// Failf records one violation.
func (c *Check) Failf(format string, args ...any) {
	c.Violations++
	if len(c.Details) < maxDetails {
		c.Details = append(c.Details, fmt.Sprintf(format, args...))
	}
}

// Passed reports whether the invariant held.
func (c *Check) Passed() bool { return c.Violations == 0 }

// Verdict is every check of a run, plus what they learned on the way.
type Verdict struct {
	Checks []*Check
	// FinishedWithClient counts intents whose client got a definite answer;
	// FinishedWithoutClient those whose client gave up or was stopped and
	// whose key the service finished anyway (the completer, or a request
	// still running when the client left); NeverStored those whose requests
	// all failed before reaching the store, so no key exists.
	FinishedWithClient, FinishedWithoutClient, NeverStored int
	// Succeeded and Failed count payments; Receipts counts receipts.
	Succeeded, Failed, Receipts int
	// PaymentIntents and SucceededIntents count the emulator's.
	PaymentIntents, SucceededIntents int
	// Resumed counts keys that more than one run drove (a retry or the
	// completer took them over); MaxRuns is the most runs of one key.
	Resumed, MaxRuns int
	// NeedsAttention lists the keys parked for an operator, with why.
	NeedsAttention []string
	// StripeRefunds counts the emulator's refunds; RefundedPayments the
	// payments with money given back.
	StripeRefunds, RefundedPayments int
	// Manual counts the manual payments by what became of them.
	Manual ManualCounts
	// Recovery is what the service went through in a failover run.
	Recovery *Recovery
	// LostAnswers counts the definite answers a failover lost, LostPayments
	// the 201s among them, Readopted those re-adopted from Stripe, and
	// LostRefusals the refund refusals, not sent again, nothing refunded.
	LostAnswers, LostPayments, Readopted, LostRefusals int
	// Resent counts the keys sent again after a failover;
	// RefundsOfLostPayments the refunds answered 404 because their payment
	// was lost.
	Resent, RefundsOfLostPayments int
}

// Passed reports whether every check passed.
func (v *Verdict) Passed() bool {
	for _, c := range v.Checks {
		if !c.Passed() {
			return false
		}
	}
	return true
}
