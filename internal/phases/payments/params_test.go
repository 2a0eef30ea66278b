package payments_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/idempotency"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// absent, as a member's raw value, leaves the member out.
const absent = "\x00absent"

// body returns a valid minimal payment request with the given members
// replaced, added or (with absent) removed. Each override is a name and the
// raw JSON text of its value; members are written in name order.
func body(overrides ...string) []byte {
	members := map[string]string{
		"amount":         "2000",
		"currency":       `"usd"`,
		"payment_method": `"pm_card_visa"`,
	}
	for i := 0; i+1 < len(overrides); i += 2 {
		if overrides[i+1] == absent {
			delete(members, overrides[i])
		} else {
			members[overrides[i]] = overrides[i+1]
		}
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, name := range slices.Sorted(func(yield func(string) bool) {
		for name := range members {
			if !yield(name) {
				return
			}
		}
	}) {
		if i > 0 {
			b.WriteByte(',')
		}
		q, _ := json.Marshal(name)
		b.Write(q)
		b.WriteByte(':')
		b.WriteString(members[name])
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// jsonString quotes s as a JSON string.
func jsonString(s string) string {
	q, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(q)
}

func ptr[T any](v T) *T { return &v }

func minimal() payments.Params {
	return payments.Params{Amount: 2000, Currency: "usd", PaymentMethod: "pm_card_visa"}
}

func with(f func(*payments.Params)) *payments.Params {
	p := minimal()
	f(&p)
	return &p
}

func TestDecodeParams(t *testing.T) {
	t.Parallel()

	const whole = "" // the pointer to the whole body
	tests := []struct {
		name string
		body []byte
		// want is the accepted request; nil when pointers are expected.
		want *payments.Params
		// pointers are the JSON pointers of the expected errors, in order.
		pointers []string
	}{
		// Valid bodies.
		{name: "minimal", body: body(), want: ptr(minimal())},
		{name: "full", body: []byte(`{"amount":99999999,"currency":"eur","payment_method":"pm_1Abc_XYZ","description":"Order #1 — café"}`),
			want: &payments.Params{Amount: 99999999, Currency: "eur", PaymentMethod: "pm_1Abc_XYZ", Description: ptr("Order #1 — café")}},
		{name: "members in any order with white space", body: []byte(" \r\n{ \"payment_method\" : \"pm_card_visa\" ,\t\"currency\":\"usd\" , \"amount\" : 2000 }\n"), want: ptr(minimal())},
		{name: "escaped member names and values", body: []byte(`{"\u0061mount":2000,"currency":"\u0075sd","payment_method":"pm\u005fcard_visa"}`), want: ptr(minimal())},

		// The whole body.
		{name: "nil body", body: nil, pointers: []string{whole}},
		{name: "empty body", body: []byte{}, pointers: []string{whole}},
		{name: "white space body", body: []byte(" \n"), pointers: []string{whole}},
		{name: "top-level array", body: []byte(`[{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}]`), pointers: []string{whole}},
		{name: "top-level string", body: []byte(`"{}"`), pointers: []string{whole}},
		{name: "top-level number", body: []byte(`2000`), pointers: []string{whole}},
		{name: "top-level null", body: []byte(`null`), pointers: []string{whole}},
		{name: "two objects", body: []byte(`{}{}`), pointers: []string{whole}},
		{name: "valid object then another", body: append(body(), body()...), pointers: []string{whole}},
		{name: "trailing garbage", body: append(body(), " x"...), pointers: []string{whole}},
		{name: "trailing bracket", body: append(body(), ']'), pointers: []string{whole}},
		{name: "trailing string", body: append(body(), ` "x"`...), pointers: []string{whole}},
		{name: "unterminated object", body: []byte(`{"amount":2000`), pointers: []string{whole}},
		{name: "trailing comma", body: []byte(`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa",}`), pointers: []string{whole}},
		{name: "missing comma", body: []byte(`{"amount":2000 "currency":"usd","payment_method":"pm_card_visa"}`), pointers: []string{whole}},
		{name: "missing colon", body: []byte(`{"amount" 2000,"currency":"usd","payment_method":"pm_card_visa"}`), pointers: []string{whole}},
		{name: "number as member name", body: []byte(`{1:2}`), pointers: []string{whole}},
		{name: "object as member name", body: []byte(`{{}:2}`), pointers: []string{whole}},
		{name: "missing value", body: []byte(`{"amount":}`), pointers: []string{whole}},
		{name: "raw control character in a string", body: body("description", "\"a\x01b\""), pointers: []string{whole}},
		{name: "byte order mark", body: append([]byte("\ufeff"), body()...), pointers: []string{whole}},
		{name: "duplicate member", body: []byte(`{"amount":2000,"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`), pointers: []string{whole}},
		{name: "duplicate member with different values", body: []byte(`{"amount":1,"currency":"usd","payment_method":"pm_card_visa","amount":2}`), pointers: []string{whole}},
		{name: "duplicate member spelt with an escape", body: []byte(`{"amount":2000,"\u0061mount":2000,"currency":"usd","payment_method":"pm_card_visa"}`), pointers: []string{whole}},
		{name: "duplicate unknown member", body: []byte(`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","tip":1,"tip":1}`), pointers: []string{whole}},
		{name: "invalid UTF-8 in a value", body: body("description", "\"caf\xe9\""), pointers: []string{whole}},
		{name: "invalid UTF-8 in a name", body: []byte("{\"amount\":2000,\"currency\":\"usd\",\"payment_method\":\"pm_card_visa\",\"\xff\":1}"), pointers: []string{whole}},
		{name: "invalid UTF-8 outside strings", body: append(body(), 0xff), pointers: []string{whole}},
		{name: "UTF-8 encoded surrogate", body: body("description", "\"\xed\xa0\x80\""), pointers: []string{whole}},
		{name: "nesting beyond the decoder's limit", body: body("amount", strings.Repeat("[", 100_000)+strings.Repeat("]", 100_000)), pointers: []string{whole}},
		{name: "unbalanced deep nesting", body: body("amount", strings.Repeat("[", 100_000)), pointers: []string{whole}},

		// Required members.
		{name: "empty object", body: []byte(`{}`), pointers: []string{"/amount", "/currency", "/payment_method"}},
		{name: "amount missing", body: body("amount", absent), pointers: []string{"/amount"}},
		{name: "currency missing", body: body("currency", absent), pointers: []string{"/currency"}},
		{name: "payment_method missing", body: body("payment_method", absent), pointers: []string{"/payment_method"}},

		// amount.
		{name: "amount 0", body: body("amount", "0"), pointers: []string{"/amount"}},
		{name: "amount 1", body: body("amount", "1"), want: with(func(p *payments.Params) { p.Amount = 1 })},
		{name: "amount 99999999", body: body("amount", "99999999"), want: with(func(p *payments.Params) { p.Amount = payments.MaxAmount })},
		{name: "amount 100000000", body: body("amount", "100000000"), pointers: []string{"/amount"}},
		{name: "amount -1", body: body("amount", "-1"), pointers: []string{"/amount"}},
		{name: "amount -0", body: body("amount", "-0"), pointers: []string{"/amount"}},
		{name: "amount 1.5", body: body("amount", "1.5"), pointers: []string{"/amount"}},
		// Only the integer spelling of an amount is accepted, though JSON
		// and RFC 8785 take 2e3 and 2000.0 for the number 2000.
		{name: "amount 2e3", body: body("amount", "2e3"), pointers: []string{"/amount"}},
		{name: "amount 2000.0", body: body("amount", "2000.0"), pointers: []string{"/amount"}},
		{name: "amount as a string", body: body("amount", `"2000"`), pointers: []string{"/amount"}},
		{name: "amount 1e400", body: body("amount", "1e400"), pointers: []string{"/amount"}},
		{name: "amount 99999999999999999999999", body: body("amount", "99999999999999999999999"), pointers: []string{"/amount"}},
		{name: "amount beyond int64", body: body("amount", "9223372036854775808"), pointers: []string{"/amount"}},
		{name: "amount null", body: body("amount", "null"), pointers: []string{"/amount"}},
		{name: "amount true", body: body("amount", "true"), pointers: []string{"/amount"}},
		{name: "amount array", body: body("amount", "[2000]"), pointers: []string{"/amount"}},
		{name: "amount object", body: body("amount", `{"value":2000}`), pointers: []string{"/amount"}},
		{name: "amount deeply nested", body: body("amount", strings.Repeat("[", 5000)+strings.Repeat("]", 5000)), pointers: []string{"/amount"}},
		{name: "amount leading zero", body: body("amount", "02000"), pointers: []string{whole}},
		{name: "amount leading plus", body: body("amount", "+2000"), pointers: []string{whole}},

		// currency.
		{name: "currency usd", body: body("currency", `"usd"`), want: ptr(minimal())},
		{name: "currency jpy", body: body("currency", `"jpy"`), want: with(func(p *payments.Params) { p.Currency = "jpy" })},
		{name: "currency aed (first code)", body: body("currency", `"aed"`), want: with(func(p *payments.Params) { p.Currency = "aed" })},
		{name: "currency zwl (last code)", body: body("currency", `"zwl"`), want: with(func(p *payments.Params) { p.Currency = "zwl" })},
		{name: "currency USD", body: body("currency", `"USD"`), pointers: []string{"/currency"}},
		{name: "currency Usd", body: body("currency", `"Usd"`), pointers: []string{"/currency"}},
		{name: "currency xyz (not ISO 4217)", body: body("currency", `"xyz"`), pointers: []string{"/currency"}},
		{name: "currency empty", body: body("currency", `""`), pointers: []string{"/currency"}},
		{name: "currency us", body: body("currency", `"us"`), pointers: []string{"/currency"}},
		{name: "currency usdd", body: body("currency", `"usdd"`), pointers: []string{"/currency"}},
		{name: "currency with space", body: body("currency", `" usd"`), pointers: []string{"/currency"}},
		{name: "currency numeric code", body: body("currency", "840"), pointers: []string{"/currency"}},
		{name: "currency null", body: body("currency", "null"), pointers: []string{"/currency"}},
		{name: "currency with NUL", body: body("currency", `"usd\u0000"`), pointers: []string{"/currency"}},

		// payment_method.
		{name: "payment_method 255 characters", body: body("payment_method", jsonString("pm_"+strings.Repeat("a", 252))),
			want: with(func(p *payments.Params) { p.PaymentMethod = "pm_" + strings.Repeat("a", 252) })},
		{name: "payment_method 256 characters", body: body("payment_method", jsonString("pm_"+strings.Repeat("a", 253))), pointers: []string{"/payment_method"}},
		{name: "payment_method shortest", body: body("payment_method", `"pm_x"`), want: with(func(p *payments.Params) { p.PaymentMethod = "pm_x" })},
		{name: "payment_method without the pm_ prefix", body: body("payment_method", `"card_visa"`), pointers: []string{"/payment_method"}},
		{name: "payment_method that is a card number", body: body("payment_method", `"4242424242424242"`), pointers: []string{"/payment_method"}},
		{name: "payment_method prefix only", body: body("payment_method", `"pm_"`), pointers: []string{"/payment_method"}},
		{name: "payment_method empty", body: body("payment_method", `""`), pointers: []string{"/payment_method"}},
		{name: "payment_method with space", body: body("payment_method", `"pm card visa"`), pointers: []string{"/payment_method"}},
		{name: "payment_method with trailing space", body: body("payment_method", `"pm_card_visa "`), pointers: []string{"/payment_method"}},
		{name: "payment_method with trailing line feed", body: body("payment_method", `"pm_card_visa\n"`), pointers: []string{"/payment_method"}},
		{name: "payment_method with hyphen", body: body("payment_method", `"pm-card"`), pointers: []string{"/payment_method"}},
		{name: "payment_method non-ASCII", body: body("payment_method", `"pm_é"`), pointers: []string{"/payment_method"}},
		{name: "payment_method number", body: body("payment_method", "42"), pointers: []string{"/payment_method"}},
		{name: "payment_method null", body: body("payment_method", "null"), pointers: []string{"/payment_method"}},

		// description.
		{name: "description null", body: body("description", "null"), want: ptr(minimal())},
		{name: "description empty", body: body("description", `""`), want: with(func(p *payments.Params) { p.Description = ptr("") })},
		{name: "description 1000 characters", body: body("description", jsonString(strings.Repeat("a", 1000))),
			want: with(func(p *payments.Params) { p.Description = ptr(strings.Repeat("a", 1000)) })},
		{name: "description 1000 two-byte characters", body: body("description", jsonString(strings.Repeat("é", 1000))),
			want: with(func(p *payments.Params) { p.Description = ptr(strings.Repeat("é", 1000)) })},
		{name: "description 1000 escaped characters", body: body("description", `"`+strings.Repeat(`\u00e9`, 1000)+`"`),
			want: with(func(p *payments.Params) { p.Description = ptr(strings.Repeat("é", 1000)) })},
		{name: "description 1000 four-byte characters", body: body("description", jsonString(strings.Repeat("😀", 1000))),
			want: with(func(p *payments.Params) { p.Description = ptr(strings.Repeat("😀", 1000)) })},
		{name: "description 1001 characters", body: body("description", jsonString(strings.Repeat("a", 1001))), pointers: []string{"/description"}},
		{name: "description 1001 two-byte characters", body: body("description", jsonString(strings.Repeat("é", 1001))), pointers: []string{"/description"}},
		{name: "description with line breaks and tabs", body: body("description", `"line 1\nline 2\r\n\tindented"`),
			want: with(func(p *payments.Params) { p.Description = ptr("line 1\nline 2\r\n\tindented") })},
		{name: "description with U+2028 and U+FFFD", body: body("description", `"a\u2028b\ufffd"`),
			want: with(func(p *payments.Params) { p.Description = ptr("a\u2028b\ufffd") })},
		{name: "description with NUL", body: body("description", `"a\u0000b"`), pointers: []string{"/description"}},
		{name: "description with U+0001", body: body("description", `"a\u0001b"`), pointers: []string{"/description"}},
		{name: "description with backspace", body: body("description", `"a\bb"`), pointers: []string{"/description"}},
		{name: "description with form feed", body: body("description", `"a\fb"`), pointers: []string{"/description"}},
		{name: "description with escape", body: body("description", `"\u001b[31mred"`), pointers: []string{"/description"}},
		{name: "description with DEL", body: body("description", `"a`+"\x7f"+`b"`), pointers: []string{"/description"}},
		{name: "description with C1 control", body: body("description", `"a\u0085b"`), pointers: []string{"/description"}},
		{name: "description with lone high surrogate", body: body("description", `"a\ud800b"`), pointers: []string{"/description"}},
		{name: "description with lone low surrogate", body: body("description", `"a\udc00"`), pointers: []string{"/description"}},
		{name: "description with reversed surrogates", body: body("description", `"\ude00\ud83d"`), pointers: []string{"/description"}},
		{name: "description with high surrogate then other escape", body: body("description", `"\ud800\u0041"`), pointers: []string{"/description"}},
		{name: "description with two high surrogates", body: body("description", `"\ud800\ud800\udc00"`), pointers: []string{"/description"}},
		{name: "description with pair then lone low surrogate", body: body("description", `"\ud83d\ude00\udc00"`), pointers: []string{"/description"}},
		{name: "description with high surrogate at the end", body: body("description", `"x\udbff"`), pointers: []string{"/description"}},
		{name: "description with escaped backslash before u", body: body("description", `"\\ud800"`),
			want: with(func(p *payments.Params) { p.Description = ptr(`\ud800`) })},
		{name: "description with upper-case surrogate pair", body: body("description", `"\uD83D\uDE00!"`),
			want: with(func(p *payments.Params) { p.Description = ptr("😀!") })},
		{name: "description with surrogate pair", body: body("description", `"\ud83d\ude00"`),
			want: with(func(p *payments.Params) { p.Description = ptr("😀") })},
		{name: "description number", body: body("description", "1"), pointers: []string{"/description"}},
		{name: "description false", body: body("description", "false"), pointers: []string{"/description"}},
		{name: "description object", body: body("description", "{}"), pointers: []string{"/description"}},

		// Unknown members, pointed at with RFC 6901 escaping.
		{name: "unknown member", body: body("tip", "100"), pointers: []string{"/tip"}},
		{name: "unknown null member", body: body("metadata", "null"), pointers: []string{"/metadata"}},
		{name: "member name with solidus", body: body("a/b", "1"), pointers: []string{"/a~1b"}},
		{name: "member name with tilde", body: body("~x", "1"), pointers: []string{"/~0x"}},
		{name: "member name with tilde and solidus", body: body("~1/~0", "1"), pointers: []string{"/~01~1~00"}},
		{name: "empty member name", body: body("", "1"), pointers: []string{"/"}},
		{name: "member name differing in case", body: body("Amount", "2000"), pointers: []string{"/Amount"}},
		{name: "unicode member name", body: body("montant", "1", "prénom", `"x"`), pointers: []string{"/montant", "/prénom"}},

		// Every error at once, sorted by pointer.
		{name: "errors sorted by pointer",
			body:     []byte(`{"zeta":1,"tip":2,"description":1,"payment_method":"pm card","currency":"USD","amount":0,"a/b":3,"Zed":4}`),
			pointers: []string{"/Zed", "/amount", "/a~1b", "/currency", "/description", "/payment_method", "/tip", "/zeta"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, errs := payments.DecodeParams(tt.body)
			if tt.want != nil {
				require.Empty(t, errs)
				require.Equal(t, tt.want, p)
				return
			}
			require.Nil(t, p)
			pointers := make([]string, len(errs))
			for i, e := range errs {
				pointers[i] = e.Pointer
				require.NotEmpty(t, e.Detail, "error %d", i)
			}
			require.Equal(t, tt.pointers, pointers)
		})
	}
}

// TestDecodeParamsErrorOrderIsStable decodes a body with many unknown
// members repeatedly: the errors are the same each time and sorted by
// pointer, the first twenty unknown members named and the rest counted.
func TestDecodeParamsErrorOrderIsStable(t *testing.T) {
	t.Parallel()
	var overrides []string
	for _, name := range strings.Fields("q w e r t y u i o p a s d f g h j k l z x c v b n m") {
		overrides = append(overrides, name, "1")
	}
	b := body(overrides...)
	_, first := payments.DecodeParams(b)
	require.Len(t, first, 21)
	require.Equal(t, problem.FieldError{Pointer: "", Detail: "6 more unknown members"}, first[0])
	require.True(t, slices.IsSortedFunc(first, func(a, b problem.FieldError) int { return strings.Compare(a.Pointer, b.Pointer) }))
	for range 20 {
		_, errs := payments.DecodeParams(b)
		require.Equal(t, first, errs)
	}
}

// TestDecodeParamsDetails pins the messages a client reads for the most
// common mistakes.
func TestDecodeParamsDetails(t *testing.T) {
	t.Parallel()
	_, errs := payments.DecodeParams([]byte(`{"currency":"USD","payment_method":"pm card","tip":1}`))
	require.Equal(t, []problem.FieldError{
		{Pointer: "/amount", Detail: "is required"},
		{Pointer: "/currency", Detail: "must be a lowercase ISO 4217 currency code, such as usd"},
		{Pointer: "/payment_method", Detail: "must be a Stripe PaymentMethod id (pm_…) of at most 255 letters, digits and underscores"},
		{Pointer: "/tip", Detail: "unknown member"},
	}, errs)

	_, errs = payments.DecodeParams(body("description", `"\u0000"`, "currency", `"\udead"`))
	require.Equal(t, []problem.FieldError{
		{Pointer: "/currency", Detail: `must not contain an unpaired UTF-16 surrogate escape (\ud800 to \udfff)`},
		{Pointer: "/description", Detail: "must not contain NUL characters"},
	}, errs)

	_, errs = payments.DecodeParams([]byte(`{"amount":2000,"amount":2000}`))
	require.Equal(t, []problem.FieldError{{Pointer: "", Detail: `member "amount" appears more than once`}}, errs)
}

// fingerprint decodes b as the API does and returns its canonical body and
// fingerprint.
func fingerprint(t *testing.T, b []byte) (string, []byte) {
	t.Helper()
	params, errs := payments.Decode(b, nil)
	require.Empty(t, errs, "body %s", b)
	canonical, sum, err := idempotency.Fingerprint(payments.Method, payments.Path, params)
	require.NoError(t, err)
	return string(canonical), sum
}

// TestParamsCanonical checks that a request is fingerprinted as decoded: a
// null optional member is the member left out, while every value that makes
// another payment makes another fingerprint.
func TestParamsCanonical(t *testing.T) {
	t.Parallel()
	canonicalAbsent, absent := fingerprint(t, body())
	require.Equal(t, `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`, canonicalAbsent)

	t.Run("null description is no description", func(t *testing.T) {
		t.Parallel()
		canonical, sum := fingerprint(t, body("description", "null"))
		require.Equal(t, canonicalAbsent, canonical)
		require.Equal(t, absent, sum)
	})

	t.Run("spelling does not matter", func(t *testing.T) {
		t.Parallel()
		_, sum := fingerprint(t, []byte(" {\"payment_method\":\"pm\\u005fcard_visa\", \"description\" : null,\"currency\":\"usd\",\"amount\":2000}\n"))
		require.Equal(t, absent, sum)
	})

	t.Run("a description is another request", func(t *testing.T) {
		t.Parallel()
		_, empty := fingerprint(t, body("description", `""`))
		_, x := fingerprint(t, body("description", `"x"`))
		_, y := fingerprint(t, body("description", `"y"`))
		require.NotEqual(t, absent, empty, "an empty description is a description")
		require.NotEqual(t, absent, x)
		require.NotEqual(t, x, y)
	})

	t.Run("same text as the body's own canonical form", func(t *testing.T) {
		t.Parallel()
		// encoding/json escapes <, > and & for HTML; RFC 8785 does not, and
		// the fingerprint undoes the escapes in the params Decode returns.
		b := body("description", `"<a href=\"x\">&amp; \u2028 é</a>"`)
		canonical, sum := fingerprint(t, b)
		rawCanonical, rawSum, err := idempotency.Fingerprint(payments.Method, payments.Path, b)
		require.NoError(t, err)
		require.Equal(t, string(rawCanonical), canonical)
		require.Equal(t, rawSum, sum)
	})
}

var (
	paymentMethodRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,255}$`)
	currencyRE      = regexp.MustCompile(`^[a-z]{3}$`)
)

// checkLimits fails unless p satisfies every documented limit of a payment
// request.
func checkLimits(t *testing.T, p *payments.Params) {
	t.Helper()
	require.GreaterOrEqual(t, p.Amount, int64(payments.MinAmount))
	require.LessOrEqual(t, p.Amount, int64(payments.MaxAmount))
	require.Regexp(t, currencyRE, p.Currency)
	require.Regexp(t, paymentMethodRE, p.PaymentMethod)
	if p.Description != nil {
		d := *p.Description
		require.True(t, utf8.ValidString(d), "description %q is not UTF-8", d)
		require.LessOrEqual(t, utf8.RuneCountInString(d), payments.MaxDescriptionLen)
		for _, r := range d {
			require.False(t, r == 0 || unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r', "description %q holds control character %U", d, r)
			require.False(t, r >= 0xd800 && r <= 0xdfff, "description %q holds surrogate %U", d, r)
		}
	}
}

// FuzzDecodeParams checks that DecodeParams never panics, that what it
// accepts satisfies every documented limit, that an accepted request
// survives a round trip through encoding/json unchanged, and that the API's
// next step, the fingerprint, accepts every body DecodeParams accepts and
// gives the params Decode returns the body's own fingerprint, but for a
// null description left out. A refused body gets sorted errors, each with a JSON
// pointer.
func FuzzDecodeParams(f *testing.F) {
	for _, seed := range []string{
		`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`,
		`{"amount":99999999,"currency":"eur","payment_method":"pm_1","description":"Café\n\t😀"}`,
		`{"amount":1,"currency":"jpy","payment_method":"pm_x","description":null}`,
		`{"description":"<&>\u2028","amount":7,"currency":"usd","payment_method":"pm_x"}`,
		`{"amount":2e3,"currency":"USD","payment_method":"pm card","description":1,"tip":1,"a/b~":2}`,
		`{"amount":1,"amount":2}`,
		`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","description":"\ud800"}`,
		`{"amount":[[[[[[[[[[]]]]]]]]]]}`,
		`{}{}`,
		`[]`,
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, errs := payments.DecodeParams(b)
		if p == nil {
			require.NotEmpty(t, errs, "neither params nor errors for %q", b)
			require.True(t, slices.IsSortedFunc(errs, func(a, b problem.FieldError) int { return strings.Compare(a.Pointer, b.Pointer) }), "errors not sorted: %v", errs)
			for _, e := range errs {
				require.True(t, e.Pointer == "" || strings.HasPrefix(e.Pointer, "/"), "pointer %q", e.Pointer)
				require.NotEmpty(t, e.Detail)
			}
			return
		}
		require.Empty(t, errs)
		checkLimits(t, p)

		_, rawSum, err := idempotency.Fingerprint(payments.Method, payments.Path, b)
		require.NoError(t, err, "accepted body %q cannot be fingerprinted", b)

		// The API fingerprints the params Decode returns and stores them in
		// canonical form: both decode to the same request, and they differ
		// from the body itself only by a null description left out, so a
		// null member and its absence are one request and no other
		// fingerprint changes.
		params, errs := payments.Decode(b, nil)
		require.Empty(t, errs)
		again, errs := payments.DecodeParams(params)
		require.Empty(t, errs, "params %q (from %q) refused", params, b)
		require.Equal(t, p, again)
		canonical, sum, err := idempotency.Fingerprint(payments.Method, payments.Path, params)
		require.NoError(t, err, "params %q (from %q)", params, b)
		again, errs = payments.DecodeParams(canonical)
		require.Empty(t, errs, "canonical %q (from %q) refused", canonical, b)
		require.Equal(t, p, again)
		var members map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(b, &members))
		if string(members["description"]) == "null" {
			delete(members, "description")
			withoutNull, err := json.Marshal(members)
			require.NoError(t, err)
			_, rawSum, err = idempotency.Fingerprint(payments.Method, payments.Path, withoutNull)
			require.NoError(t, err)
		}
		require.Equal(t, rawSum, sum, "body %q and its canonical params %q", b, canonical)
	})
}

// TestCaptureMethodKeepsFingerprints checks that capture_method left out,
// null or "automatic" is the request a key made before manual capture
// existed stored (same canonical params, same fingerprint), so such a key's
// retry after the deploy is still the same request; "manual" is another.
func TestCaptureMethodKeepsFingerprints(t *testing.T) {
	t.Parallel()
	const before = `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`
	_, old, err := idempotency.Fingerprint(payments.Method, payments.Path, []byte(before))
	require.NoError(t, err)
	for _, v := range []string{"", "null", `"automatic"`} {
		b := body()
		if v != "" {
			b = body("capture_method", v)
		}
		canonical, sum := fingerprint(t, b)
		require.Equal(t, before, canonical, "capture_method %s", v)
		require.Equal(t, old, sum, "capture_method %s", v)
	}
	canonical, sum := fingerprint(t, body("capture_method", `"manual"`))
	require.Equal(t, `{"amount":2000,"capture_method":"manual","currency":"usd","payment_method":"pm_card_visa"}`, canonical)
	require.NotEqual(t, old, sum)

	for _, v := range []string{`"Manual"`, `"later"`, `1`, `true`} {
		_, errs := payments.DecodeParams(body("capture_method", v))
		require.Equal(t, []problem.FieldError{{Pointer: "/capture_method", Detail: errs[0].Detail}}, errs, "capture_method %s", v)
	}
}
