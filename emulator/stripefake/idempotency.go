package stripefake

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// sweepEvery is how many claims pass between sweeps of expired entries.
const sweepEvery = 1000

// idemKey scopes idempotency keys per API key, like Stripe scopes them per
// account and mode.
type idemKey struct {
	apiKey string
	key    string
}

// idemEntry is a saved (done) or executing (!done) idempotent request.
type idemEntry struct {
	endpoint  string // path of the first request, e.g. "/v1/refunds"
	hash      string
	done      bool
	status    int
	body      []byte
	requestID string
	savedAt   time.Time
}

// claimResult says what a request with an Idempotency-Key must do.
type claimResult int

const (
	claimNew           claimResult = iota // first use: execute, then save
	claimReplay                           // saved result with same params: replay it
	claimMismatch                         // saved result with other params: 400
	claimInUse                            // first request still executing: 409
	claimOtherEndpoint                    // first used on another endpoint: 400
)

// hashParams hashes the request parameters independently of their order.
func hashParams(form url.Values) string {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		vals := slices.Clone(form[k])
		slices.Sort(vals)
		for _, v := range vals {
			// Length prefixes keep "a=bc" and "ab=c" apart.
			h.Write([]byte(strconv.Itoa(len(k)) + ":" + k + "=" + strconv.Itoa(len(v)) + ":" + v + "\n"))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// claim looks key up and, if it is unused (or expired), marks it as executing
// on endpoint with the given parameter hash. For claimReplay and
// claimOtherEndpoint it returns a copy of the entry.
func (s *Server) claim(k idemKey, endpoint, hash string) (claimResult, idemEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.sinceSweep++
	if s.sinceSweep >= sweepEvery {
		s.sinceSweep = 0
		for key, e := range s.idem {
			if e.done && now.Sub(e.savedAt) > s.ttl {
				delete(s.idem, key)
			}
		}
	}
	e, ok := s.idem[k]
	if ok && e.done && now.Sub(e.savedAt) > s.ttl {
		ok = false
	}
	switch {
	case !ok:
		s.idem[k] = &idemEntry{endpoint: endpoint, hash: hash}
		return claimNew, idemEntry{}
	case e.endpoint != endpoint:
		// Stripe binds a key to the endpoint it was first used on, whether
		// or not that request is still executing.
		s.stats.IdempotencyErrors++
		return claimOtherEndpoint, idemEntry{endpoint: e.endpoint}
	case !e.done:
		s.stats.KeyInUse++
		return claimInUse, idemEntry{}
	case e.hash != hash:
		s.stats.IdempotencyErrors++
		return claimMismatch, idemEntry{}
	default:
		s.stats.Replays++
		return claimReplay, *e
	}
}

// claimOrAnswer claims k for this request to endpoint. If the request must
// not execute (replay, mismatch, other endpoint, key in use) it writes the
// answer and returns false.
func (s *Server) claimOrAnswer(w http.ResponseWriter, k idemKey, endpoint, hash, reqID string) bool {
	res, saved := s.claim(k, endpoint, hash)
	switch res {
	case claimReplay:
		w.Header().Set("Idempotent-Replayed", "true")
		w.Header().Set("Original-Request", saved.requestID)
		writeJSON(w, saved.status, saved.body)
		return false
	case claimMismatch:
		writeError(w, http.StatusBadRequest, idempotencyMismatch(k.key, reqID))
		return false
	case claimOtherEndpoint:
		writeError(w, http.StatusBadRequest, errorObject{
			Type: typeIdempotency,
			Message: "Keys for idempotent requests can only be used for the same endpoint they were first used for ('" +
				endpoint + "' vs '" + saved.endpoint + "'). Try using a key other than '" + k.key +
				"' if you meant to execute a different request.",
			RequestLogURL: requestLogURL(reqID),
		})
		return false
	case claimInUse:
		writeError(w, http.StatusConflict, errorObject{
			Type: typeIdempotency,
			Code: "idempotency_key_in_use",
			Message: "There is currently another in-progress request using this idempotent key (that probably means you " +
				"submitted twice, and the other request is still going through): " + k.key + ". Please try again later.",
			RequestLogURL: requestLogURL(reqID),
		})
		return false
	}
	return true
}

// idempotencyMismatch is Stripe's 400 idempotency_error for a key reused with
// other parameters (also answered by FaultIdempotencyError).
func idempotencyMismatch(key, reqID string) errorObject {
	msg := "Keys for idempotent requests can only be used with the same parameters they were first used with."
	if key != "" {
		msg += " Try using a key other than '" + key + "' if you meant to execute a different request."
	}
	return errorObject{Type: typeIdempotency, Message: msg, RequestLogURL: requestLogURL(reqID)}
}

// save stores the result of an executed request under k (nil: no key).
func (s *Server) save(k *idemKey, status int, body []byte, requestID string) {
	if k == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.idem[*k]
	if !ok {
		return
	}
	e.done = true
	e.status = status
	e.body = body
	e.requestID = requestID
	e.savedAt = s.now()
}

// unclaim forgets an executing claim whose request ended without a result
// worth saving (validation failure, abandoned hang).
func (s *Server) unclaim(k *idemKey) {
	if k == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.idem[*k]; ok && !e.done {
		delete(s.idem, *k)
	}
}
