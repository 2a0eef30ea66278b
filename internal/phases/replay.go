package phases

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// keyState is what answering for an existing key needs: its stored answer,
// whether a run holds it, whether it awaits an operator. Execute reads only
// this much of a key.
type keyState = dbsqlc.IdempotencyKeyGetByUserKeyRow

// stateOf is a whole key's keyState.
func stateOf(key *dbsqlc.IdempotencyKey) *keyState {
	st := &keyState{
		ID: key.ID, RequestFingerprint: key.RequestFingerprint, RecoveryPoint: key.RecoveryPoint,
		Leased: key.LockToken.Valid, Parked: key.NeedsAttentionAt != nil,
		ResponseHeaders: string(key.ResponseHeaders), ResponseBody: key.ResponseBody,
	}
	if key.ResponseCode != nil {
		st.ResponseCode = *key.ResponseCode
	}
	return st
}

// replay is the stored answer of a finished key.
func replay(key *keyState) (*Result, error) {
	resp := &Response{Status: int(key.ResponseCode), Body: key.ResponseBody}
	if len(key.ResponseHeaders) > 0 {
		if err := json.Unmarshal([]byte(key.ResponseHeaders), &resp.Headers); err != nil {
			return nil, fmt.Errorf("error decoding stored response headers: %w", err)
		}
	}
	return &Result{Response: resp, Replayed: true}, nil
}

// WriteHeaders sets the response's headers in h.
func (r *Response) WriteHeaders(h http.Header) {
	for name, value := range r.Headers {
		h.Set(name, value)
	}
}

// headersJSON is the response's headers as a key stores them.
func (r *Response) headersJSON() ([]byte, error) { return json.Marshal(r.Headers) }
