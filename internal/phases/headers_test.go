package phases

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// headersOf is what a response's headers look like once written.
func headersOf(resp *Response) http.Header {
	h := http.Header{}
	resp.WriteHeaders(h)
	return h
}

// written is h as WriteHeaders writes it.
func written(h map[string]string) http.Header {
	out := http.Header{}
	for name, value := range h {
		out[http.CanonicalHeaderKey(name)] = []string{value}
	}
	return out
}

func TestStoredHeadersAreWrittenAsEncodingJSONReadsThem(t *testing.T) {
	t.Parallel()
	for _, h := range []map[string]string{
		{},
		{"Content-Type": "application/json"},
		{"Content-Type": "application/problem+json", "Location": "/payments/42", "Retry-After": "1"},
		{"X-Note": "thé – ok"},
		{"X-Odd": `a"b\c<d>&`}, // escaped: decoded by encoding/json
	} {
		stored, err := json.Marshal(h)
		require.NoError(t, err)
		got, err := replay(&keyState{ResponseCode: 201, ResponseHeaders: string(stored)})
		require.NoError(t, err)
		require.Equal(t, written(h), headersOf(got.Response), "%s", stored)
		require.Equal(t, written(h), headersOf(&Response{Headers: h}), "a fresh answer's")
	}

	// What a jsonb column gives back as text reads the same.
	jsonb := `{"Location": "/payments/1", "Content-Type": "application/json"}`
	got, err := replay(&keyState{ResponseCode: 201, ResponseHeaders: jsonb})
	require.NoError(t, err)
	require.Equal(t, http.Header{"Location": {"/payments/1"}, "Content-Type": {"application/json"}}, headersOf(got.Response))

	_, err = replay(&keyState{ResponseCode: 201, ResponseHeaders: `{"a":1}`})
	require.Error(t, err, "stored headers that are not strings")
}

// TestAReplayedResponseIsStoredWithItsHeaders: a replayed answer stored
// again keeps its headers.
func TestAReplayedResponseIsStoredWithItsHeaders(t *testing.T) {
	t.Parallel()
	jsonb := `{"Location": "/payments/1", "Content-Type": "application/json"}`
	got, err := replay(&keyState{ResponseCode: 201, ResponseHeaders: jsonb})
	require.NoError(t, err)
	stored, err := got.Response.headersJSON()
	require.NoError(t, err)
	var h map[string]string
	require.NoError(t, json.Unmarshal(stored, &h))
	require.Equal(t, map[string]string{"Location": "/payments/1", "Content-Type": "application/json"}, h)
}
