package stripefake

import (
	"errors"
	"net/http"
	"strings"
	"time"
)

// AdminFaultsRequest is the body of POST /_fake/faults. Both parts are
// optional; "chaos":{} turns chaos off.
type AdminFaultsRequest struct {
	// Inject is appended to the injected fault queue.
	Inject []AdminFault `json:"inject,omitempty"`
	// Chaos, when present, replaces the chaos configuration.
	Chaos *AdminChaos `json:"chaos,omitempty"`
}

// AdminFault is the JSON form of a Fault.
type AdminFault struct {
	// Kind is "latency", "500", "lost_answer", "hang", "500_charged",
	// "idempotency_error" or "outlive_client"; required.
	Kind *FaultKind `json:"kind"`
	// LatencyMS is Fault.Latency in milliseconds; required (positive) for
	// "outlive_client".
	LatencyMS int64 `json:"latency_ms,omitempty"`
	// Op is Fault.Op: "create_payment_intent", "capture_payment_intent",
	// "cancel_payment_intent" or "create_refund" keeps the fault for the
	// next write of that kind; absent or empty, the next write takes it.
	Op Op `json:"op,omitempty"`
}

// AdminChaos is the JSON form of Chaos, durations in milliseconds.
type AdminChaos struct {
	// P500 is Chaos.P500.
	P500 float64 `json:"p_500"`
	// PLostAnswer is Chaos.PLostAnswer.
	PLostAnswer float64 `json:"p_lost_answer"`
	// PHang is Chaos.PHang.
	PHang float64 `json:"p_hang"`
	// P500Charged is Chaos.P500Charged.
	P500Charged float64 `json:"p_500_charged"`
	// PIdempotencyError is Chaos.PIdempotencyError.
	PIdempotencyError float64 `json:"p_idempotency_error"`
	// POutliveClient is Chaos.POutliveClient; it needs OutliveLatencyMS.
	POutliveClient float64 `json:"p_outlive_client"`
	// LatencyMS is Chaos.Latency.
	LatencyMS int64 `json:"latency_ms"`
	// MaxLatencyMS is Chaos.MaxLatency.
	MaxLatencyMS int64 `json:"max_latency_ms"`
	// HangForMS is Chaos.HangFor.
	HangForMS int64 `json:"hang_for_ms"`
	// OutliveLatencyMS is Chaos.OutliveLatency.
	OutliveLatencyMS int64 `json:"outlive_latency_ms"`
	// SearchLagMS is Chaos.SearchLag.
	SearchLagMS int64 `json:"search_lag_ms"`
	// PWebhookDelay is Chaos.PWebhookDelay; it needs WebhookDelayMS.
	PWebhookDelay float64 `json:"p_webhook_delay"`
	// WebhookDelayMS is Chaos.WebhookDelay.
	WebhookDelayMS int64 `json:"webhook_delay_ms"`
	// PWebhookDuplicate is Chaos.PWebhookDuplicate.
	PWebhookDuplicate float64 `json:"p_webhook_duplicate"`
	// PWebhookReorder is Chaos.PWebhookReorder.
	PWebhookReorder float64 `json:"p_webhook_reorder"`
	// PWebhookLost is Chaos.PWebhookLost.
	PWebhookLost float64 `json:"p_webhook_lost"`
}

// AdminFaultsResponse is the answer of POST /_fake/faults.
type AdminFaultsResponse struct {
	// PendingFaults is the length of the injected fault queue.
	PendingFaults int `json:"pending_faults"`
	// Chaos is the chaos configuration now in force.
	Chaos AdminChaos `json:"chaos"`
}

// Chaos checks ranges and converts c to a Chaos: probabilities within [0, 1],
// those of the create faults adding up to at most 1 (the webhook faults are
// drawn independently), durations not negative, max_latency_ms (unless 0)
// not below latency_ms, outlive_latency_ms positive when p_outlive_client
// is, and webhook_delay_ms positive when p_webhook_delay is.
func (c AdminChaos) Chaos() (Chaos, error) {
	ps := []float64{c.P500, c.PLostAnswer, c.PHang, c.P500Charged, c.PIdempotencyError, c.POutliveClient}
	sum := 0.0
	for _, p := range ps {
		if p < 0 || p > 1 {
			return Chaos{}, errors.New("chaos probabilities must be within [0, 1]")
		}
		sum += p
	}
	// The tolerance forgives rounding, as in 0.1 taken ten times.
	if sum > 1+1e-9 {
		return Chaos{}, errors.New("chaos probabilities must not add up to more than 1")
	}
	for _, p := range []float64{c.PWebhookDelay, c.PWebhookDuplicate, c.PWebhookReorder, c.PWebhookLost} {
		if p < 0 || p > 1 {
			return Chaos{}, errors.New("chaos probabilities must be within [0, 1]")
		}
	}
	for _, d := range []int64{c.LatencyMS, c.MaxLatencyMS, c.HangForMS, c.OutliveLatencyMS, c.SearchLagMS, c.WebhookDelayMS} {
		if d < 0 {
			return Chaos{}, errors.New("chaos durations must not be negative")
		}
	}
	if c.MaxLatencyMS != 0 && c.MaxLatencyMS < c.LatencyMS {
		return Chaos{}, errors.New("max_latency_ms must not be below latency_ms")
	}
	if c.POutliveClient > 0 && c.OutliveLatencyMS == 0 {
		return Chaos{}, errors.New("p_outlive_client needs a positive outlive_latency_ms")
	}
	if c.PWebhookDelay > 0 && c.WebhookDelayMS == 0 {
		return Chaos{}, errors.New("p_webhook_delay needs a positive webhook_delay_ms")
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	return Chaos{
		P500: c.P500, PLostAnswer: c.PLostAnswer, PHang: c.PHang,
		P500Charged: c.P500Charged, PIdempotencyError: c.PIdempotencyError, POutliveClient: c.POutliveClient,
		Latency:        ms(c.LatencyMS),
		MaxLatency:     ms(c.MaxLatencyMS),
		HangFor:        ms(c.HangForMS),
		OutliveLatency: ms(c.OutliveLatencyMS),
		SearchLag:      ms(c.SearchLagMS),
		PWebhookDelay:  c.PWebhookDelay, WebhookDelay: ms(c.WebhookDelayMS),
		PWebhookDuplicate: c.PWebhookDuplicate, PWebhookReorder: c.PWebhookReorder, PWebhookLost: c.PWebhookLost,
	}, nil
}

// adminChaos is the JSON form of c.
func adminChaos(c Chaos) AdminChaos {
	return AdminChaos{
		P500: c.P500, PLostAnswer: c.PLostAnswer, PHang: c.PHang,
		P500Charged: c.P500Charged, PIdempotencyError: c.PIdempotencyError, POutliveClient: c.POutliveClient,
		LatencyMS:        c.Latency.Milliseconds(),
		MaxLatencyMS:     c.MaxLatency.Milliseconds(),
		HangForMS:        c.HangFor.Milliseconds(),
		OutliveLatencyMS: c.OutliveLatency.Milliseconds(),
		SearchLagMS:      c.SearchLag.Milliseconds(),
		PWebhookDelay:    c.PWebhookDelay, WebhookDelayMS: c.WebhookDelay.Milliseconds(),
		PWebhookDuplicate: c.PWebhookDuplicate, PWebhookReorder: c.PWebhookReorder, PWebhookLost: c.PWebhookLost,
	}
}

// handleAdminStats answers GET /_fake/stats.
func (s *Server) handleAdminStats(w http.ResponseWriter, _ *http.Request) {
	writeValue(w, http.StatusOK, s.Stats())
}

// handleAdminPaymentIntents answers GET /_fake/payment_intents.
func (s *Server) handleAdminPaymentIntents(w http.ResponseWriter, _ *http.Request) {
	writeValue(w, http.StatusOK, s.PaymentIntents())
}

// handleAdminFaults answers POST /_fake/faults.
func (s *Server) handleAdminFaults(w http.ResponseWriter, r *http.Request) {
	bad := func(msg string) {
		writeError(w, http.StatusBadRequest, errorObject{Type: typeInvalidRequest, Message: msg})
	}
	var req AdminFaultsRequest
	if !decodeAdmin(w, r, &req) {
		return
	}
	faults := make([]Fault, 0, len(req.Inject))
	for _, f := range req.Inject {
		if f.Kind == nil {
			bad(`every injected fault needs a "kind"`)
			return
		}
		if f.LatencyMS < 0 {
			bad("latency_ms must not be negative")
			return
		}
		if *f.Kind == FaultOutliveClient && f.LatencyMS == 0 {
			bad("an outlive_client fault needs a positive latency_ms")
			return
		}
		if err := validOp(f.Op); err != nil {
			bad(strings.TrimPrefix(err.Error(), "stripefake: "))
			return
		}
		faults = append(faults, Fault{Kind: *f.Kind, Op: f.Op, Latency: time.Duration(f.LatencyMS) * time.Millisecond})
	}
	var chaos Chaos
	if req.Chaos != nil {
		var err error
		if chaos, err = req.Chaos.Chaos(); err != nil {
			bad(err.Error())
			return
		}
	}
	s.Inject(faults...)
	if req.Chaos != nil {
		s.SetChaos(chaos)
	}

	s.mu.Lock()
	resp := AdminFaultsResponse{PendingFaults: len(s.faults), Chaos: adminChaos(s.chaos)}
	s.mu.Unlock()
	writeValue(w, http.StatusOK, resp)
}

// handleAdminRelease answers POST /_fake/release.
func (s *Server) handleAdminRelease(w http.ResponseWriter, _ *http.Request) {
	hung := s.Stats().HungNow
	s.ReleaseHangs()
	writeValue(w, http.StatusOK, map[string]int64{"released": hung})
}
