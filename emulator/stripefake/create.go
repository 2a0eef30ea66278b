package stripefake

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// outcome is the answer an execution produced.
type outcome struct {
	status int
	body   []byte
}

// writeEndpoint is one kind of request that executes (a write): POST
// /v1/payment_intents, POST /v1/payment_intents/{id}/capture and /cancel,
// POST /v1/refunds. serveWrite gives them all the same idempotency and
// faults.
type writeEndpoint struct {
	// op names the request for the faults that target it (Fault.Op).
	op Op
	// path is the request's path, to which idempotency keys are bound: a
	// key first used to capture one PaymentIntent is refused for another.
	path string
	// count counts the request in the stats (under the lock).
	count func(*Stats)
	// parse validates the form. It returns the execution, or a validation
	// failure detected before execution (never saved for idempotency).
	parse func(form url.Values) (run executor, perr *errorObject)
}

// executor runs a validated write and returns its answer. It is called at
// most once, with the request id and the idempotency key (if any).
type executor func(reqID, idempotencyKey string) outcome

// handleCreate answers POST /v1/payment_intents.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, apiKey string) {
	s.serveWrite(w, r, apiKey, writeEndpoint{
		op:    OpCreatePaymentIntent,
		path:  "/v1/payment_intents",
		count: func(st *Stats) { st.CreateRequests++ },
		parse: func(form url.Values) (executor, *errorObject) {
			p, perr := parseCreateParams(form)
			if perr != nil {
				return nil, perr
			}
			return func(reqID, key string) outcome {
				status, body := s.createIntent(p, reqID, key)
				return outcome{status, body}
			}, nil
		},
	})
}

// serveWrite answers a write request (a create, a capture, a cancel) of
// endpoint ep.
//
// Order of business, as in Stripe: parse the form; with an Idempotency-Key,
// replay / reject / claim the key; validate (failures are not saved); take a
// fault; execute; save the result under the key; answer.
//
// Execution runs in its own goroutine, detached from the request: once it
// started (after any hang) it executes (creates, captures, cancels) and
// saves whatever the client does, as Stripe does. If the client leaves
// first the handler returns at once and the execution finishes on its own.
func (s *Server) serveWrite(w http.ResponseWriter, r *http.Request, apiKey string, ep writeEndpoint) {
	s.bump(ep.count)
	reqID := w.Header().Get("Request-Id")
	if err := r.ParseForm(); err != nil {
		s.bump(func(st *Stats) { st.InvalidRequests++ })
		writeError(w, http.StatusBadRequest, errorObject{
			Type:    typeInvalidRequest,
			Message: "Invalid request body: " + err.Error(),
		})
		return
	}

	var key *idemKey
	keyName := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if keyName != "" {
		w.Header().Set("Idempotency-Key", keyName)
		k := idemKey{apiKey: apiKey, key: keyName}
		if !s.claimOrAnswer(w, k, ep.path, hashParams(r.Form), reqID) {
			return
		}
		key = &k
	}

	run, perr := ep.parse(r.Form)
	if perr != nil {
		s.unclaim(key)
		s.bump(func(st *Stats) { st.InvalidRequests++ })
		perr.RequestLogURL = requestLogURL(reqID)
		writeError(w, http.StatusBadRequest, *perr)
		return
	}

	pl := s.nextPlan(ep.op)
	if pl.kind != faultNone {
		s.log.Info().Str("request_id", reqID).Str("path", ep.path).Str("op", string(ep.op)).Str("fault", pl.kind.String()).
			Dur("latency", pl.latency).Str("idempotency_key", keyName).Msg("stripefake: fault")
	}
	if pl.kind == FaultIdempotencyError {
		// Answered like a key reused with other parameters: not executed,
		// not saved.
		s.unclaim(key)
		s.bump(func(st *Stats) { st.FaultsIdempotencyError++ })
		writeError(w, http.StatusBadRequest, idempotencyMismatch(keyName, reqID))
		return
	}
	if !s.hang(r.Context(), pl) {
		s.unclaim(key)
		return
	}

	done := make(chan outcome, 1)
	s.bump(func(st *Stats) { st.ExecutingNow++ })
	go func() { done <- s.execute(r.Context(), pl, run, key, reqID, keyName) }()
	var out outcome
	select {
	case out = <-done:
	case <-r.Context().Done():
		s.log.Info().Str("request_id", reqID).Msg("stripefake: client gone; the request keeps executing")
		return
	}

	if pl.kind == FaultLostAnswer {
		s.bump(func(st *Stats) { st.LostAnswers++ })
		dropConnection(w, out.status)
		return
	}
	writeJSON(w, out.status, out.body)
}

// execute sleeps the plan's latency, then runs the write as the plan says
// and saves the result under key. It never looks at ctx except to count, in
// Stats.ClientsGone, results that nobody is waiting for any more.
func (s *Server) execute(ctx context.Context, pl plan, run executor, key *idemKey, reqID, keyName string) outcome {
	if pl.kind == FaultOutliveClient {
		s.bump(func(st *Stats) { st.OutliveClients++ })
	}
	if pl.latency > 0 {
		s.bump(func(st *Stats) { st.Latencies++ })
		time.Sleep(pl.latency)
	}

	var out outcome
	switch pl.kind {
	case Fault500:
		s.bump(func(st *Stats) { st.Faults500++ })
		out = outcome{http.StatusInternalServerError, unknownErrorBody(reqID)}
	case Fault500Charged:
		run(reqID, keyName)
		s.bump(func(st *Stats) { st.Faults500Charged++ })
		out = outcome{http.StatusInternalServerError, unknownErrorBody(reqID)}
	default:
		out = run(reqID, keyName)
	}
	s.save(key, out.status, out.body, reqID)

	gone := ctx.Err() != nil
	s.bump(func(st *Stats) {
		st.ExecutingNow--
		if gone {
			st.ClientsGone++
		}
	})
	if gone {
		s.log.Info().Str("request_id", reqID).Int("status", out.status).
			Msg("stripefake: request finished after its client left")
	}
	return out
}

// unknownErrorBody is the 500 of Fault500 and Fault500Charged; the two are
// indistinguishable to the client, as Stripe's indeterminate 500s are.
func unknownErrorBody(reqID string) []byte {
	return errorBody(errorObject{
		Type:          typeAPI,
		Message:       "An unknown error occurred (injected by stripefake).",
		RequestLogURL: requestLogURL(reqID),
	})
}
