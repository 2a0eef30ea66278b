package captures_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/phases/captures"
	"github.com/paymentsd/paymentsd/internal/problem"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	const id = "pay_06h1s0zd3xxrn3hryrwmn9r8bg"
	path := func(v string) func(string) string { return func(string) string { return v } }

	tests := []struct {
		name     string
		decode   func([]byte, func(string) string) ([]byte, []string)
		body     string
		want     string
		pointers []string
	}{
		{name: "capture all", decode: capture, body: `{}`, want: `{"payment_id":"` + id + `"}`},
		{name: "capture all, null", decode: capture, body: `{"amount_to_capture": null}`, want: `{"payment_id":"` + id + `"}`},
		{name: "capture part", decode: capture, body: `{"amount_to_capture": 1500}`, want: `{"amount_to_capture":1500,"payment_id":"` + id + `"}`},
		{name: "capture zero", decode: capture, body: `{"amount_to_capture": 0}`, pointers: []string{"/amount_to_capture"}},
		{name: "capture string", decode: capture, body: `{"amount_to_capture": "1"}`, pointers: []string{"/amount_to_capture"}},
		{name: "capture unknown member", decode: capture, body: `{"amount": 1}`, pointers: []string{"/amount"}},
		{name: "cancel", decode: cancel, body: `{}`, want: `{"payment_id":"` + id + `"}`},
		{name: "cancel takes no amount", decode: cancel, body: `{"amount_to_capture": 1}`, pointers: []string{"/amount_to_capture"}},
		{name: "cancel not an object", decode: cancel, body: `[]`, pointers: []string{""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, pointers := tc.decode([]byte(tc.body), path(id))
			require.Equal(t, tc.pointers, pointers)
			if tc.want != "" {
				require.JSONEq(t, tc.want, string(got))
			}
		})
	}

	_, pointers := capture([]byte(`{}`), path("pay_nope"))
	require.Equal(t, []string{""}, pointers, "a path that names no payment")
}

// capture and cancel decode as the API does and keep only the pointers of
// the errors.
func capture(body []byte, path func(string) string) ([]byte, []string) {
	return pointersOf(captures.DecodeCapture(body, path))
}

func cancel(body []byte, path func(string) string) ([]byte, []string) {
	return pointersOf(captures.DecodeCancel(body, path))
}

func pointersOf(params []byte, errs []problem.FieldError) ([]byte, []string) {
	var pointers []string
	for _, e := range errs {
		pointers = append(pointers, e.Pointer)
	}
	return params, pointers
}
