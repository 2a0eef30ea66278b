package chaos

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cards the clients pay with.
const (
	CardVisa     = "pm_card_visa"
	CardDeclined = "pm_card_chargeDeclined"
)

// Intent is one client intent: one Idempotency-Key and one body, sent as
// often as the client chose to.
type Intent struct {
	Client int
	User   User
	Key    string
	// Refund is set for a refund of payment PaymentID, Action for a
	// capture or cancel of it (manual.go); otherwise the intent is a
	// payment, authorized only when Manual.
	Refund    bool
	Action    Action
	Manual    bool
	PaymentID string
	Body      []byte
	Card      string
	Amount    int64
	// GiveUpAfter is the attempt after which the client gives up without a
	// definite answer; 0 means it never does.
	GiveUpAfter int

	Attempts int
	// Labels are the answers of the attempts in order: a status code, or
	// the kind of transport error.
	Labels []string
	// Status and Response are the definite answer, if the client got one.
	Status   int
	Response []byte
	Replayed bool
	// GaveUp: the client gave up by design; Abandoned: the run ended first.
	GaveUp, Abandoned bool
	// Done is set once the client moved on from a payment, its refunds
	// included: only then may lost history take it (lost_history.go).
	Done bool
	// MustExist is set once an answer proved the key was stored (a 409 for
	// it, a 503 from the processor, a definite answer).
	MustExist bool
	// AwaitsOperator is set for a refund key lost with its payment when the
	// payment, sent again, was handed to an operator: the refund waits for
	// the operator too and is not sent again (lost_history.go).
	AwaitsOperator bool
	// Unexpected is a final answer that is neither definite nor retryable.
	Unexpected string
	// Parent is, for a refund, a capture or a cancel, the payment intent
	// whose payment it acts on.
	Parent *Intent
	// Rival is, for a capture racing a cancel, the other of the pair.
	Rival *Intent
	// Lost says why, after a failover or lost history, the database no
	// longer holds the definite answer the client got; empty when it does.
	Lost string
	// Resend is the key sent again after a failover or lost history, as
	// a client reconciling would: for an answer the database lost, a key
	// stored and lost, or a refund sent to a payment the database lost.
	Resend *Intent

	Started, Ended time.Time
}

// Definite reports whether the client got a definite answer.
func (in *Intent) Definite() bool { return in.Status != 0 }

// Path is where the intent is sent.
func (in *Intent) Path() string {
	switch {
	case in.Refund:
		return "/payments/" + in.PaymentID + "/refunds"
	case in.Action != "":
		return "/payments/" + in.PaymentID + "/" + string(in.Action)
	}
	return "/payments"
}

// Ledger records every intent and every attempt's answer.
type Ledger struct {
	mu      sync.Mutex
	intents []*Intent
	answers map[string]int
	created []time.Time
	stamps  []stampedAnswer // every answer and when (patroni.go)
}

// Created records when a payment was answered 201.
func (l *Ledger) Created(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.created = append(l.created, at)
}

// FirstCreatedAfter is when the first payment was answered 201 after t,
// if one was.
func (l *Ledger) FirstCreatedAfter(t time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return firstAfter(l.created, t)
}

func firstAfter(times []time.Time, t time.Time) (first time.Time, ok bool) {
	for _, at := range times {
		if at.After(t) && (!ok || at.Before(first)) {
			first, ok = at, true
		}
	}
	return first, ok
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger { return &Ledger{answers: map[string]int{}} }

// Add records an intent before its first attempt.
func (l *Ledger) Add(in *Intent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.intents = append(l.intents, in)
}

// Answer records one attempt's answer.
func (l *Ledger) Answer(in *Intent, label string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	in.Attempts++
	in.Labels = append(in.Labels, label)
	l.answers[label]++
	l.stamps = append(l.stamps, stampedAnswer{time.Now(), label})
}

// Finish records how an intent ended; the client calls it once.
func (l *Ledger) Finish(in *Intent, update func(in *Intent)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	update(in)
	in.Ended = time.Now()
}

// Update changes recorded intents under the ledger's lock.
func (l *Ledger) Update(change func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	change()
}

// Intents returns the recorded intents. Call it once the clients stopped.
func (l *Ledger) Intents() []*Intent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Intent(nil), l.intents...)
}

// Answers returns the count of each attempt answer, ordered by label.
func (l *Ledger) Answers() []LabelCount {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]LabelCount, 0, len(l.answers))
	for k, v := range l.answers {
		out = append(out, LabelCount{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Label < out[j].Label })
	return out
}

// Progress is a one-line summary for the progress events.
func (l *Ledger) Progress() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	attempts, declined := 0, 0
	for label, n := range l.answers {
		attempts += n
		if strings.HasPrefix(label, "402") {
			declined += n
		}
	}
	return strconv.Itoa(len(l.intents)) + " intents, " + strconv.Itoa(attempts) + " attempts, " +
		strconv.Itoa(l.answers["201"]) + " created, " + strconv.Itoa(declined) + " declined"
}

// LabelCount is how often one answer was seen.
type LabelCount struct {
	Label string
	Count int
}
