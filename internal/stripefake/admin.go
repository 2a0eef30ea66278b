package stripefake

import (
	"encoding/json"
	"net/http"
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
	// Kind is "latency", "500", "lost_answer" or "hang"; required.
	Kind *FaultKind `json:"kind"`
	// LatencyMS is Fault.Latency in milliseconds.
	LatencyMS int64 `json:"latency_ms,omitempty"`
}

// AdminChaos is the JSON form of Chaos, durations in milliseconds.
type AdminChaos struct {
	// P500 is Chaos.P500.
	P500 float64 `json:"p_500"`
	// PLostAnswer is Chaos.PLostAnswer.
	PLostAnswer float64 `json:"p_lost_answer"`
	// PHang is Chaos.PHang.
	PHang float64 `json:"p_hang"`
	// LatencyMS is Chaos.Latency.
	LatencyMS int64 `json:"latency_ms"`
	// MaxLatencyMS is Chaos.MaxLatency.
	MaxLatencyMS int64 `json:"max_latency_ms"`
	// HangForMS is Chaos.HangFor.
	HangForMS int64 `json:"hang_for_ms"`
}

// AdminFaultsResponse is the answer of POST /_fake/faults.
type AdminFaultsResponse struct {
	// PendingFaults is the length of the injected fault queue.
	PendingFaults int `json:"pending_faults"`
	// Chaos is the chaos configuration now in force.
	Chaos AdminChaos `json:"chaos"`
}

// validate checks ranges and converts to Chaos.
func (c AdminChaos) validate() (Chaos, string) {
	for _, p := range []float64{c.P500, c.PLostAnswer, c.PHang} {
		if p < 0 || p > 1 {
			return Chaos{}, "chaos probabilities must be within [0, 1]"
		}
	}
	if c.P500+c.PLostAnswer+c.PHang > 1 {
		return Chaos{}, "chaos probabilities must not add up to more than 1"
	}
	if c.LatencyMS < 0 || c.MaxLatencyMS < 0 || c.HangForMS < 0 {
		return Chaos{}, "chaos durations must not be negative"
	}
	if c.MaxLatencyMS != 0 && c.MaxLatencyMS < c.LatencyMS {
		return Chaos{}, "max_latency_ms must not be below latency_ms"
	}
	return Chaos{
		P500: c.P500, PLostAnswer: c.PLostAnswer, PHang: c.PHang,
		Latency:    time.Duration(c.LatencyMS) * time.Millisecond,
		MaxLatency: time.Duration(c.MaxLatencyMS) * time.Millisecond,
		HangFor:    time.Duration(c.HangForMS) * time.Millisecond,
	}, ""
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
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		bad("invalid JSON body: " + err.Error())
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
		faults = append(faults, Fault{Kind: *f.Kind, Latency: time.Duration(f.LatencyMS) * time.Millisecond})
	}
	var chaos Chaos
	if req.Chaos != nil {
		var msg string
		if chaos, msg = req.Chaos.validate(); msg != "" {
			bad(msg)
			return
		}
	}
	s.Inject(faults...)
	if req.Chaos != nil {
		s.SetChaos(chaos)
	}

	s.mu.Lock()
	c := s.chaos
	resp := AdminFaultsResponse{
		PendingFaults: len(s.faults),
		Chaos: AdminChaos{
			P500: c.P500, PLostAnswer: c.PLostAnswer, PHang: c.PHang,
			LatencyMS:    c.Latency.Milliseconds(),
			MaxLatencyMS: c.MaxLatency.Milliseconds(),
			HangForMS:    c.HangFor.Milliseconds(),
		},
	}
	s.mu.Unlock()
	writeValue(w, http.StatusOK, resp)
}

// handleAdminRelease answers POST /_fake/release.
func (s *Server) handleAdminRelease(w http.ResponseWriter, _ *http.Request) {
	hung := s.Stats().HungNow
	s.ReleaseHangs()
	writeValue(w, http.StatusOK, map[string]int64{"released": hung})
}
