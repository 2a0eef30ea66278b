package idempotency_test

import (
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/idempotency"
)

const (
	fpMethod = "POST"
	fpPath   = "/payments"
)

func TestFingerprintSameRequest(t *testing.T) {
	t.Parallel()

	const canonical = `{"amount":2000,"currency":"usd","description":"Café","payment_method":"pm_card_visa"}`
	tests := []struct {
		name string
		body string
	}{
		{name: "canonical", body: canonical},
		{name: "members reordered", body: `{"payment_method":"pm_card_visa","description":"Café","currency":"usd","amount":2000}`},
		{name: "white space", body: " \r\n{ \"amount\" :\t2000 ,\n  \"currency\" : \"usd\",\"description\":\"Café\",\r\n\"payment_method\": \"pm_card_visa\" }\n"},
		{name: "unicode escape", body: `{"amount":2000,"currency":"usd","description":"Caf\u00e9","payment_method":"pm_card_visa"}`},
		{name: "upper-case unicode escape", body: `{"amount":2000,"currency":"usd","description":"Caf\u00E9","payment_method":"pm_card_visa"}`},
		{name: "escaped member name", body: `{"\u0061mount":2000,"currency":"\u0075sd","description":"Café","payment_method":"pm_card_visa"}`},
		{name: "escaped underscore", body: `{"amount":2000,"currency":"usd","description":"Caf` + "\u00e9" + `","payment_method":"pm\u005fcard_visa"}`},
		// RFC 8785 serializes numbers as ECMAScript does, so every spelling
		// of the same IEEE 754 double canonicalizes to one text: these all
		// share a fingerprint. (DecodeParams accepts only the integer
		// spelling of an amount, so only 2000 ever reaches the store.)
		{name: "number with fraction", body: `{"amount":2000.0,"currency":"usd","description":"Café","payment_method":"pm_card_visa"}`},
		{name: "number with exponent", body: `{"amount":2e3,"currency":"usd","description":"Café","payment_method":"pm_card_visa"}`},
		{name: "number with upper-case signed exponent", body: `{"amount":2E+3,"currency":"usd","description":"Café","payment_method":"pm_card_visa"}`},
		{name: "number with fraction and exponent", body: `{"amount":0.2e4,"currency":"usd","description":"Café","payment_method":"pm_card_visa"}`},
		{name: "number with trailing zeros", body: `{"amount":2000.000,"currency":"usd","description":"Café","payment_method":"pm_card_visa"}`},
	}
	wantSum := sha256.Sum256([]byte(fpMethod + "\n" + fpPath + "\n" + canonical))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gotCanonical, sum, err := idempotency.Fingerprint(fpMethod, fpPath, []byte(tt.body))
			require.NoError(t, err)
			require.Equal(t, canonical, string(gotCanonical))
			// The sum is SHA-256 of method, path and canonical body, each
			// ended by a line break but the last: stored key rows depend on
			// this exact construction.
			require.Equal(t, wantSum[:], sum)
		})
	}
}

func TestFingerprintDifferentRequest(t *testing.T) {
	t.Parallel()

	const body = `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`
	_, base, err := idempotency.Fingerprint(fpMethod, fpPath, []byte(body))
	require.NoError(t, err)

	tests := []struct {
		name         string
		method, path string
		body         string
	}{
		{name: "different amount", method: fpMethod, path: fpPath, body: `{"amount":2001,"currency":"usd","payment_method":"pm_card_visa"}`},
		{name: "amount as string", method: fpMethod, path: fpPath, body: `{"amount":"2000","currency":"usd","payment_method":"pm_card_visa"}`},
		{name: "different currency", method: fpMethod, path: fpPath, body: `{"amount":2000,"currency":"eur","payment_method":"pm_card_visa"}`},
		{name: "different case", method: fpMethod, path: fpPath, body: `{"amount":2000,"currency":"USD","payment_method":"pm_card_visa"}`},
		{name: "extra member", method: fpMethod, path: fpPath, body: `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","tip":1}`},
		// JSON values, not requests: the endpoint drops a null optional
		// member before fingerprinting (TestParamsCanonical).
		{name: "extra null member", method: fpMethod, path: fpPath, body: `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","description":null}`},
		{name: "different method", method: "PUT", path: fpPath, body: body},
		{name: "different path", method: fpMethod, path: "/refunds", body: body},
		{name: "path with trailing slash", method: fpMethod, path: fpPath + "/", body: body},
		{name: "method and path split elsewhere", method: "POS", path: "T" + fpPath, body: body},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, sum, err := idempotency.Fingerprint(tt.method, tt.path, []byte(tt.body))
			require.NoError(t, err)
			require.Len(t, sum, sha256.Size)
			require.NotEqual(t, base, sum)
		})
	}
}

func TestFingerprintCanonicalForm(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name, body, canonical string
	}{
		// RFC 8785 section 3.2.2, the example of the whole transform.
		{
			name: "RFC 8785 example",
			body: `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
			canonical: `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		// RFC 8785 section 3.2.3: members are sorted by their names' UTF-16
		// code units, so the emoji (a surrogate pair) comes before U+FB33.
		{
			name: "RFC 8785 sorting example",
			body: `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`,
			canonical: `{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control","ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign","😀":"Emoji: Grinning Face","` + "\ufb33" + `":"Hebrew Letter Dalet With Dagesh"}`,
		},
		{name: "nested objects sorted", body: `{"b":{"d":1,"c":[{"f":1,"e":2}]},"a":[]}`, canonical: `{"a":[],"b":{"c":[{"e":2,"f":1}],"d":1}}`},
		{name: "array order kept", body: `[3, 1, 2]`, canonical: `[3,1,2]`},
		{name: "negative zero", body: `{"n":-0}`, canonical: `{"n":0}`},
		{name: "negative zero with fraction", body: `{"n":-0.0e5}`, canonical: `{"n":0}`},
		{name: "large integer becomes exponent", body: `{"n":100000000000000000000000}`, canonical: `{"n":1e+23}`},
		{name: "1e21", body: `{"n":1000000000000000000000}`, canonical: `{"n":1e+21}`},
		{name: "below 1e21 stays integer", body: `{"n":1e20}`, canonical: `{"n":100000000000000000000}`},
		{name: "small fraction", body: `{"n":0.000001}`, canonical: `{"n":0.000001}`},
		{name: "smaller fraction becomes exponent", body: `{"n":0.0000001}`, canonical: `{"n":1e-7}`},
		{name: "integer beyond 2^53 rounds", body: `{"n":9007199254740993}`, canonical: `{"n":9007199254740992}`},
		{name: "literals", body: `[true,false,null]`, canonical: `[true,false,null]`},
		{name: "top-level string", body: ` "x" `, canonical: `"x"`},
		{name: "top-level number", body: "42\n", canonical: `42`},
		{name: "escaped solidus unescaped", body: `{"s":"a\/b"}`, canonical: `{"s":"a/b"}`},
		{name: "control characters", body: `{"s":"\u0000\u0001\b\f\n\r\t\u001f"}`, canonical: `{"s":"\u0000\u0001\b\f\n\r\t\u001f"}`},
		{name: "DEL and U+2028 written raw", body: `{"s":"\u007f\u2028"}`, canonical: "{\"s\":\"\x7f\u2028\"}"},
		{name: "non-BMP escape", body: `{"s":"\ud83d\ude00"}`, canonical: `{"s":"😀"}`},
		{name: "U+FFFD itself is kept", body: `{"s":"\ufffd"}`, canonical: `{"s":"` + "\ufffd" + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			canonical, _, err := idempotency.Fingerprint(fpMethod, fpPath, []byte(tt.body))
			require.NoError(t, err)
			require.Equal(t, tt.canonical, string(canonical))
		})
	}
}

func TestFingerprintInvalidJSON(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		body []byte
	}{
		{name: "nil", body: nil},
		{name: "empty", body: []byte{}},
		{name: "white space only", body: []byte(" \n")},
		{name: "unterminated object", body: []byte(`{"amount":2000`)},
		{name: "missing value", body: []byte(`{"amount":}`)},
		{name: "missing colon", body: []byte(`{"amount" 2000}`)},
		{name: "missing comma", body: []byte(`{"a":1 "b":2}`)},
		{name: "trailing comma in object", body: []byte(`{"a":1,}`)},
		{name: "trailing comma in array", body: []byte(`[1,]`)},
		{name: "leading comma in array", body: []byte(`[,1]`)},
		{name: "two values", body: []byte(`{}{}`)},
		{name: "trailing garbage", body: []byte(`{"a":1} x`)},
		{name: "single quotes", body: []byte(`{'a':1}`)},
		{name: "unquoted name", body: []byte(`{a:1}`)},
		{name: "leading zero", body: []byte(`{"a":01}`)},
		{name: "leading plus", body: []byte(`{"a":+1}`)},
		{name: "bare fraction", body: []byte(`{"a":.5}`)},
		{name: "hexadecimal", body: []byte(`{"a":0x10}`)},
		{name: "NaN", body: []byte(`{"a":NaN}`)},
		{name: "Infinity", body: []byte(`{"a":Infinity}`)},
		{name: "number out of double range", body: []byte(`{"a":1e400}`)},
		{name: "space inside number", body: []byte(`[1 2]`)},
		{name: "misspelled literal", body: []byte(`[tru]`)},
		{name: "upper-case literal", body: []byte(`[True]`)},
		{name: "raw control character in string", body: []byte("{\"a\":\"x\x01y\"}")},
		{name: "unknown escape", body: []byte(`{"a":"\x"}`)},
		{name: "short unicode escape", body: []byte(`{"a":"\u12"}`)},
		{name: "lone high surrogate", body: []byte(`{"a":"\ud800"}`)},
		{name: "lone low surrogate", body: []byte(`{"a":"\udc00"}`)},
		{name: "reversed surrogate pair", body: []byte(`{"a":"\ude00\ud83d"}`)},
		{name: "invalid UTF-8 in string", body: []byte("{\"a\":\"\xff\"}")},
		{name: "UTF-8 encoded surrogate", body: []byte("{\"a\":\"\xed\xa0\x80\"}")},
		{name: "byte order mark", body: []byte("\ufeff{}")},
		{name: "duplicate member", body: []byte(`{"a":1,"a":2}`)},
		{name: "duplicate member spelt differently", body: []byte(`{"a":1,"\u0061":1}`)},
		{name: "nesting beyond the limit", body: []byte(strings.Repeat("[", 10001) + strings.Repeat("]", 10001))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			canonical, sum, err := idempotency.Fingerprint(fpMethod, fpPath, tt.body)
			require.Error(t, err)
			require.Nil(t, canonical)
			require.Nil(t, sum)
		})
	}
}

// FuzzFingerprint checks that Fingerprint never panics and that
// canonicalization is idempotent: the canonical body of a canonical body is
// itself, with the same fingerprint. It also checks that only valid JSON is
// accepted and that the canonical form is valid UTF-8 JSON.
func FuzzFingerprint(f *testing.F) {
	for _, seed := range []string{
		`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`,
		`{"b":1,"a":[1.5,2e3,-0,true,null,"x\u00e9\ud83d\ude00"]}`,
		`[333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001]`,
		`{"\u20ac":1,"\r":2,"\ufb33":3,"\ud83d\ude00":4}`,
		`{"a":1,"a":2}`,
		`{"a":"\ud800"}`,
		`"\u0000\u001f\u007f"`,
		`{}{}`,
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		canonical, sum, err := idempotency.Fingerprint(fpMethod, fpPath, body)
		if err != nil {
			require.Nil(t, canonical)
			require.Nil(t, sum)
			return
		}
		require.Len(t, sum, sha256.Size)
		require.True(t, json.Valid(body), "accepted invalid JSON %q", body)
		require.True(t, json.Valid(canonical), "canonical form %q of %q is not JSON", canonical, body)
		require.True(t, utf8.Valid(canonical), "canonical form %q of %q is not UTF-8", canonical, body)

		again, sumAgain, err := idempotency.Fingerprint(fpMethod, fpPath, canonical)
		require.NoError(t, err, "canonical form %q of %q", canonical, body)
		require.Equal(t, string(canonical), string(again), "canonicalizing %q twice", body)
		require.Equal(t, sum, sumAgain)
	})
}
