package phases

import (
	"bytes"
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
		ResponseHeaders: key.ResponseHeaders, ResponseBody: key.ResponseBody,
	}
	if key.ResponseCode != nil {
		st.ResponseCode = *key.ResponseCode
	}
	return st
}

// replay is the stored answer of a finished key. Its headers stay as stored
// when eachStoredHeader reads them, to be written straight into the answer
// (Response.WriteHeaders): decoding them into a map was a replay's largest
// allocation. Anything else is decoded here.
func replay(key *keyState) (*Result, error) {
	resp := &Response{Status: int(key.ResponseCode), Body: key.ResponseBody}
	if len(key.ResponseHeaders) > 0 {
		if eachStoredHeader(key.ResponseHeaders, func(_, _, _, _ int) {}) {
			resp.stored = key.ResponseHeaders
		} else if err := json.Unmarshal(key.ResponseHeaders, &resp.Headers); err != nil {
			return nil, fmt.Errorf("error decoding stored response headers: %w", err)
		}
	}
	return &Result{Response: resp, Replayed: true}, nil
}

// WriteHeaders sets the response's headers in h under their canonical
// names, their values sharing one allocation.
func (r *Response) WriteHeaders(h http.Header) {
	set := func(values []string, name string) {
		h[http.CanonicalHeaderKey(name)] = values[len(values)-1 : len(values) : len(values)]
	}
	if r.stored == nil {
		values := make([]string, 0, len(r.Headers))
		for name, value := range r.Headers {
			values = append(values, value)
			set(values, name)
		}
		return
	}
	b := string(r.stored) // one copy, which every name and value slices
	values := make([]string, 0, bytes.Count(r.stored, []byte{'"'})/4)
	eachStoredHeader(r.stored, func(name, nameEnd, value, valueEnd int) {
		values = append(values, b[value:valueEnd])
		set(values, b[name:nameEnd])
	})
}

// headersJSON is the response's headers as a key stores them: as they were
// stored already when the response is a replay.
func (r *Response) headersJSON() ([]byte, error) {
	if r.stored != nil {
		return r.stored, nil
	}
	return json.Marshal(r.Headers)
}

// eachStoredHeader reads stored response headers as Postgres gives back the
// jsonb they were stored as (a flat object of strings, a space after each
// colon and comma) when none of them holds an escape, calling fn with the
// bounds of each name and value; it reports false, having called fn for
// none or some, for anything else, which encoding/json then reads.
func eachStoredHeader(stored []byte, fn func(name, nameEnd, value, valueEnd int)) bool {
	if len(stored) < 2 || stored[0] != '{' || bytes.IndexByte(stored, '\\') >= 0 {
		return false
	}
	if string(stored) == "{}" {
		return true
	}
	str := func(i int) (start, end int, ok bool) { // the string literal at stored[i:]
		if i < len(stored) && stored[i] == ' ' {
			i++
		}
		if i >= len(stored) || stored[i] != '"' {
			return 0, 0, false
		}
		n := bytes.IndexByte(stored[i+1:], '"')
		return i + 1, i + 1 + n, n >= 0
	}
	for i := 1; ; {
		name, nameEnd, ok := str(i)
		if !ok || nameEnd+1 >= len(stored) || stored[nameEnd+1] != ':' {
			return false
		}
		value, valueEnd, ok := str(nameEnd + 2)
		if !ok || valueEnd+1 >= len(stored) {
			return false
		}
		switch stored[valueEnd+1] {
		case ',':
			i = valueEnd + 2
		case '}':
			if valueEnd+2 != len(stored) {
				return false
			}
			fn(name, nameEnd, value, valueEnd)
			return true
		default:
			return false
		}
		fn(name, nameEnd, value, valueEnd)
	}
}
