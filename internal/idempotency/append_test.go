package idempotency

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/require"
)

// appendSeeds hold every kind of character AppendString treats apart.
var appendSeeds = []string{
	"", "usd", "pm_card_visa", `"`, `\`, `a"b\c`, "<a href=\"x\">&amp;</a>", "\u2028\u2029", "é😀", "\x7f",
	"\b\t\n\f\r", "\x00\x01\x1f", "tab\tin the middle\n", strings.Repeat("x", 1000),
}

func TestAppendStringIsRFC8785(t *testing.T) {
	t.Parallel()
	var all strings.Builder
	for c := range 0x80 {
		all.WriteByte(byte(c))
	}
	for _, s := range append(appendSeeds, all.String()) {
		checkAppendString(t, s)
	}
}

// FuzzAppendString checks AppendString against the RFC 8785 library the
// fingerprint uses for bodies that are not canonical already.
func FuzzAppendString(f *testing.F) {
	for _, s := range appendSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if utf8.ValidString(s) {
			checkAppendString(t, s)
		}
	})
}

func checkAppendString(t *testing.T, s string) {
	encoded, err := json.Marshal(s)
	require.NoError(t, err)
	want, err := jcs.Transform(encoded)
	require.NoError(t, err)
	require.Equal(t, string(want), string(AppendString([]byte("x"), s)[1:]), "%q", s)
}
