package idempotency_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/idempotency"
)

// sfQuote writes k as an RFC 8941 sf-string: DQUOTE, k with backslash and
// DQUOTE escaped, DQUOTE.
func sfQuote(k string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k) + `"`
}

func TestParseKey(t *testing.T) {
	t.Parallel()

	type outcome int
	const (
		accepted outcome = iota
		missing          // ErrMissing: answered as idempotency-key-missing
		invalid          // any other error: idempotency-key-invalid
	)

	long := strings.Repeat("a", idempotency.MaxKeyLength)
	tests := []struct {
		name   string
		values []string
		want   outcome
		key    string
	}{
		// Missing.
		{name: "nil values", values: nil, want: missing},
		{name: "no values", values: []string{}, want: missing},
		{name: "empty value", values: []string{""}, want: missing},
		{name: "spaces only", values: []string{"   "}, want: missing},
		{name: "tabs and spaces only", values: []string{" \t \t"}, want: missing},

		// Bare keys.
		{name: "uuid", values: []string{"5f0c6f3e-8a47-4d6b-9b1e-2c1c7b8f0a11"}, key: "5f0c6f3e-8a47-4d6b-9b1e-2c1c7b8f0a11"},
		{name: "order-1", values: []string{"order-1"}, key: "order-1"},
		{name: "one character", values: []string{"x"}, key: "x"},
		{name: "optional white space is trimmed", values: []string{" \torder-1\t "}, key: "order-1"},
		{name: "255 characters", values: []string{long}, key: long},
		{name: "256 characters", values: []string{long + "a"}, want: invalid},
		{name: "every visible character allowed bare", values: []string{"!#$%&'*+-./09:<=>?@AZ[]^_`az{|}~"}, key: "!#$%&'*+-./09:<=>?@AZ[]^_`az{|}~"},

		// Values that are other structured-field items are plain bare keys:
		// none holds a character that structures a field.
		{name: "integer item is a bare key", values: []string{"12"}, key: "12"},
		{name: "boolean item is a bare key", values: []string{"?1"}, key: "?1"},
		{name: "byte sequence item is a bare key", values: []string{":YWJj:"}, key: ":YWJj:"},
		{name: "token item is a bare key", values: []string{"*tok/en"}, key: "*tok/en"},
		{name: "date item is a bare key", values: []string{"@1659578233"}, key: "@1659578233"},
		{name: "decimal item is a bare key", values: []string{"-1.5"}, key: "-1.5"},

		// Bare keys with structuring characters are refused rather than
		// taken for opaque values.
		{name: "bare key with parameter", values: []string{"k;a=1"}, want: invalid},
		{name: "bare list", values: []string{"a,b"}, want: invalid},
		{name: "bare key with backslash", values: []string{`a\b`}, want: invalid},
		{name: "bare key with parenthesis", values: []string{"a(b"}, want: invalid},
		{name: "bare key with closing parenthesis", values: []string{"ab)"}, want: invalid},
		{name: "bare key with inner DQUOTE", values: []string{`a"b"`}, want: invalid},
		{name: "display string", values: []string{`%"k"`}, want: invalid},

		// sf-string form.
		{name: "sf-string", values: []string{`"k"`}, key: "k"},
		{name: "sf-string uuid", values: []string{`"5f0c6f3e-8a47-4d6b-9b1e-2c1c7b8f0a11"`}, key: "5f0c6f3e-8a47-4d6b-9b1e-2c1c7b8f0a11"},
		{name: "sf-string with white space around", values: []string{" \t\"order-1\" \t"}, key: "order-1"},
		{name: "sf-string escaped DQUOTE", values: []string{`"a\"b"`}, key: `a"b`},
		{name: "sf-string escaped backslash", values: []string{`"a\\b"`}, key: `a\b`},
		{name: "sf-string with space", values: []string{`"a b"`}, key: "a b"},
		{name: "sf-string of only a space", values: []string{`" "`}, key: " "},
		{name: "sf-string with structuring characters", values: []string{`"(a;b,c)"`}, key: "(a;b,c)"},
		{name: "sf-string 255 characters", values: []string{`"` + long + `"`}, key: long},
		{name: "sf-string 256 characters", values: []string{`"` + long + `a"`}, want: invalid},
		{name: "sf-string 255 characters after unquoting", values: []string{`"` + strings.Repeat(`\"`, idempotency.MaxKeyLength) + `"`}, key: strings.Repeat(`"`, idempotency.MaxKeyLength)},
		{name: "sf-string 256 characters after unquoting", values: []string{`"` + strings.Repeat(`\\`, idempotency.MaxKeyLength+1) + `"`}, want: invalid},
		{name: "empty sf-string", values: []string{`""`}, want: invalid},
		{name: "sf-string with parameter", values: []string{`"k";a=1`}, want: invalid},
		{name: "sf-string with boolean parameter", values: []string{`"k";a`}, want: invalid},
		{name: "sf-string with empty parameter", values: []string{`"k";`}, want: invalid},
		{name: "sf-string with space before parameter", values: []string{`"k" ;a=1`}, want: invalid},
		{name: "sf-string list", values: []string{`"a", "b"`}, want: invalid},
		{name: "sf-string followed by garbage", values: []string{`"k"x`}, want: invalid},
		{name: "sf-string unknown escape", values: []string{`"a\nb"`}, want: invalid},
		{name: "sf-string dangling backslash", values: []string{`"a\`}, want: invalid},
		{name: "unterminated sf-string", values: []string{`"abc`}, want: invalid},
		{name: "unterminated sf-string ending in escaped DQUOTE", values: []string{`"abc\"`}, want: invalid},
		{name: "lone DQUOTE", values: []string{`"`}, want: invalid},

		// Inner lists.
		{name: "inner list", values: []string{`("a" "b")`}, want: invalid},
		{name: "inner list of one", values: []string{`("a")`}, want: invalid},
		{name: "empty inner list", values: []string{`()`}, want: invalid},

		// Control, non-ASCII and white space characters.
		{name: "NUL", values: []string{"a\x00b"}, want: invalid},
		{name: "tab inside", values: []string{"a\tb"}, want: invalid},
		{name: "DEL", values: []string{"a\x7fb"}, want: invalid},
		{name: "line feed", values: []string{"a\nb"}, want: invalid},
		{name: "control character only", values: []string{"\x01"}, want: invalid},
		{name: "space inside bare key", values: []string{"order 1"}, want: invalid},
		{name: "non-ASCII bare key", values: []string{"clé"}, want: invalid},
		{name: "invalid UTF-8 bare key", values: []string{"k\xff"}, want: invalid},
		{name: "NUL in sf-string", values: []string{"\"a\x00b\""}, want: invalid},
		{name: "tab in sf-string", values: []string{"\"a\tb\""}, want: invalid},
		{name: "DEL in sf-string", values: []string{"\"a\x7fb\""}, want: invalid},
		{name: "non-ASCII sf-string", values: []string{`"clé"`}, want: invalid},
		{name: "invalid UTF-8 sf-string", values: []string{"\"k\xff\""}, want: invalid},

		// The header given twice.
		{name: "header twice, same key", values: []string{"k", "k"}, want: invalid},
		{name: "header twice, different keys", values: []string{"a", "b"}, want: invalid},
		{name: "header twice, first empty", values: []string{"", "k"}, want: invalid},
		{name: "header twice, both empty", values: []string{"", ""}, want: invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key, err := idempotency.ParseKey(tt.values)
			switch tt.want {
			case accepted:
				require.NoError(t, err)
				require.Equal(t, tt.key, key)
			case missing:
				require.ErrorIs(t, err, idempotency.ErrMissing)
				require.Empty(t, key)
			case invalid:
				require.Error(t, err)
				require.NotErrorIs(t, err, idempotency.ErrMissing)
				require.Empty(t, key)
			}
		})
	}
}

// TestParseKeyFormsAgree checks that a bare key and its sf-string quoting
// name the same key, so that a client switching form keeps its key.
func TestParseKeyFormsAgree(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"k", "order-1", "5f0c6f3e-8a47-4d6b-9b1e-2c1c7b8f0a11", "12", "?1", ":YWJj:", "*", strings.Repeat("z", idempotency.MaxKeyLength)} {
		t.Run(k, func(t *testing.T) {
			t.Parallel()
			bare, err := idempotency.ParseKey([]string{k})
			require.NoError(t, err)
			quoted, err := idempotency.ParseKey([]string{sfQuote(k)})
			require.NoError(t, err)
			require.Equal(t, bare, quoted)
			require.Equal(t, k, bare)
		})
	}
}

// FuzzParseKey checks ParseKey's invariants on arbitrary single header
// values: it never panics, an accepted key has 1 to MaxKeyLength bytes of
// printable ASCII, and any accepted key, quoted as an sf-string, is read back
// unchanged (so a bare key and its quoting always name the same key).
func FuzzParseKey(f *testing.F) {
	for _, seed := range []string{
		"", " ", "k", "order-1", `"k"`, `"a\"b"`, `""`, `"k";a=1`, `("a" "b")`,
		":YWJj:", "?1", "12", "a\x00b", "a b", "clé", `"abc`, `"a\\b"`,
		strings.Repeat("a", 256), `"` + strings.Repeat(`\"`, 255) + `"`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := idempotency.ParseKey([]string{v})
		if err != nil {
			require.Empty(t, key)
			return
		}
		require.NotEmpty(t, key)
		require.LessOrEqual(t, len(key), idempotency.MaxKeyLength)
		for i := 0; i < len(key); i++ {
			require.Truef(t, key[i] >= 0x20 && key[i] <= 0x7e, "byte %#x at offset %d of accepted key %q is not printable ASCII", key[i], i, key)
		}

		again, err := idempotency.ParseKey([]string{sfQuote(key)})
		require.NoError(t, err, "quoted form of accepted key %q", key)
		require.Equal(t, key, again)

		// A key without white space or structuring characters is the bare
		// form of itself.
		if !strings.ContainsAny(key, ` "();,\`) {
			bare, err := idempotency.ParseKey([]string{key})
			require.NoError(t, err, "bare form of accepted key %q", key)
			require.Equal(t, key, bare)
		}

		// The same value sent twice is refused.
		_, err = idempotency.ParseKey([]string{v, v})
		require.Error(t, err)
	})
}
