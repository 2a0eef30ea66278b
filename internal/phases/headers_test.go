package phases

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecodeHeadersAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, h := range []map[string]string{
		{},
		{"Content-Type": "application/json"},
		{"Content-Type": "application/problem+json", "Location": "/payments/42", "Retry-After": "1"},
		{"X-Note": "thé – ok"},
		{"X-Odd": `a"b\c<d>&`}, // escaped: the slow path
	} {
		stored, err := json.Marshal(h)
		require.NoError(t, err)
		got, err := replay(&keyState{ResponseCode: 201, ResponseHeaders: stored})
		require.NoError(t, err)
		require.Equal(t, h, got.Response.Headers, "%s", stored)
	}
	// What a jsonb column gives back.
	h, ok := decodeHeaders([]byte(`{"Location": "/payments/1", "Content-Type": "application/json"}`))
	require.True(t, ok)
	require.Equal(t, map[string]string{"Location": "/payments/1", "Content-Type": "application/json"}, h)
	for _, bad := range []string{`{"a":1}`, `{"a":"b",}`, `{"a":"b"}x`, `{"a" : "b"}`, `{"a":  "b"}`, `{"a"}`, `[]`, `{`} {
		_, ok := decodeHeaders([]byte(bad))
		require.False(t, ok, bad)
	}
}
