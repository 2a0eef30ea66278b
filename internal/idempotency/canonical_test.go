package idempotency

import (
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/require"
)

func TestAlreadyCanonical(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]bool{
		`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`:                       true,
		`{"amount":2000,"currency":"usd","description":"Order 7 – thé","payment_method":"pm_x"}`: true,
		`{"a":[1,-2,true,false,null,"x",{},[]],"b":{"c":0}}`:                                     true,
		`{}`:                               true,
		`{"currency":"usd","amount":2000}`: false, // members out of order
		`{"a":1,"a":2}`:                    false, // a member twice
		`{"amount": 2000}`:                 false, // white space
		`{"a":"line\nbreak"}`:              false, // an escape
		`{"a":"\u003c"}`:                   false,
		`{"a":1.5}`:                        false,
		`{"a":1e3}`:                        false,
		`{"a":-0}`:                         false,
		`{"a":007}`:                        false,
		`{"a":1234567890123456}`:           false, // beyond 15 digits
		`{"é":1}`:                          false, // a non-ASCII name
		`{"a":1}{}`:                        false,
		`{"a":1,}`:                         false,
		`{"a"}`:                            false,
		`[`:                                false,
		`nul`:                              false,
		"\"\x7f\"":                         false,
		"\"\xff\"":                         false,
		``:                                 false,
	} {
		require.Equal(t, want, alreadyCanonical([]byte(body)), "%s", body)
		if want {
			out, err := jcs.Transform([]byte(body))
			require.NoError(t, err)
			require.Equal(t, body, string(out))
		}
	}
}

// FuzzAlreadyCanonical checks the shortcut against the library: whatever
// alreadyCanonical accepts, JCS returns unchanged.
func FuzzAlreadyCanonical(f *testing.F) {
	for _, seed := range []string{
		`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`,
		`{"a":[1,-2,true,false,null,"x",{},[]],"b":{"c":0}}`,
		`{"b":1,"a":2}`, `[1.5]`, `"\u2028"`, "\"\u2028\"", `{"a":{"b":[{"c":"d"}]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !alreadyCanonical(body) {
			return
		}
		out, err := jcs.Transform(body)
		require.NoError(t, err, "accepted %q", body)
		require.Equal(t, string(body), string(out))
	})
}
