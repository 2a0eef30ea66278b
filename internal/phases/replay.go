package phases

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

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
		ResponseHeaders: key.ResponseHeaders, ResponseBody: key.ResponseBody,
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
		var ok bool
		if resp.Headers, ok = decodeHeaders(key.ResponseHeaders); !ok {
			if err := json.Unmarshal(key.ResponseHeaders, &resp.Headers); err != nil {
				return nil, fmt.Errorf("error decoding stored response headers: %w", err)
			}
		}
	}
	return &Result{Response: resp, Replayed: true}, nil
}

// decodeHeaders reads stored response headers as Postgres gives back the
// jsonb fence stored (a flat object of strings, a space after each colon
// and comma), when none of them holds an escape; ok is false for anything
// else, which encoding/json then reads. Every replay decodes them, and
// encoding/json's reflection was a third of a replay's allocations.
func decodeHeaders(stored []byte) (map[string]string, bool) {
	if len(stored) < 2 || stored[0] != '{' || bytes.IndexByte(stored, '\\') >= 0 {
		return nil, false
	}
	h := make(map[string]string, 4)
	if string(stored) == "{}" {
		return h, true
	}
	b := string(stored)                      // one copy, which every name and value slices
	str := func(i int) (string, int, bool) { // the string literal at b[i:], and what follows
		if i < len(b) && b[i] == ' ' {
			i++
		}
		if i >= len(b) || b[i] != '"' {
			return "", 0, false
		}
		end := strings.IndexByte(b[i+1:], '"')
		if end < 0 {
			return "", 0, false
		}
		return b[i+1 : i+1+end], i + end + 2, true
	}
	for i := 1; ; {
		name, next, ok := str(i)
		if !ok || next >= len(b) || b[next] != ':' {
			return nil, false
		}
		value, next, ok := str(next + 1)
		if !ok || next >= len(b) {
			return nil, false
		}
		h[name] = value
		switch b[next] {
		case ',':
			i = next + 1
		case '}':
			return h, next == len(b)-1
		default:
			return nil, false
		}
	}
}
