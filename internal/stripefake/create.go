package stripefake

import (
	"net/http"
	"strings"
)

// handleCreate answers POST /v1/payment_intents.
//
// Order of business, as in Stripe: parse the form; with an Idempotency-Key,
// replay / reject / claim the key; validate (failures are not saved); take a
// fault; execute; save the result under the key; answer.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, apiKey string) {
	s.bump(func(st *Stats) { st.CreateRequests++ })
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
		if !s.claimOrAnswer(w, k, hashParams(r.Form)) {
			return
		}
		key = &k
	}

	p, perr := parseCreateParams(r.Form)
	if perr != nil {
		s.unclaim(key)
		s.bump(func(st *Stats) { st.InvalidRequests++ })
		perr.RequestLogURL = requestLogURL(reqID)
		writeError(w, http.StatusBadRequest, *perr)
		return
	}

	pl := s.nextPlan()
	if pl.kind != faultNone {
		s.log.Info().Str("request_id", reqID).Str("fault", pl.kind.String()).
			Dur("latency", pl.latency).Str("idempotency_key", keyName).Msg("stripefake: fault")
	}
	if !s.delay(r.Context(), pl) {
		s.unclaim(key)
		return
	}

	var status int
	var body []byte
	if pl.kind == Fault500 {
		s.bump(func(st *Stats) { st.Faults500++ })
		status = http.StatusInternalServerError
		body = errorBody(errorObject{
			Type:          typeAPI,
			Message:       "An unknown error occurred (injected by stripefake).",
			RequestLogURL: requestLogURL(reqID),
		})
	} else {
		status, body = s.createIntent(p, reqID, keyName)
	}
	s.save(key, status, body, reqID)

	if pl.kind == FaultLostAnswer {
		s.bump(func(st *Stats) { st.LostAnswers++ })
		dropConnection(w, status)
		return
	}
	writeJSON(w, status, body)
}
