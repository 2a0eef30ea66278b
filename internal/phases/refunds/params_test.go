package refunds_test

import (
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/idempotency"
	"github.com/paymentsd/paymentsd/internal/ids"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/phases/refunds"
)

// TestStoredParamsAreRFC8785 checks that what a refund's key stores, the
// canonical form of the params Decode returns, is what RFC 8785 makes of
// their JSON encoding, as keys stored before have it, for every shape a
// refund request takes: of a payment by its public id, and by the number
// of one made before them; and that it reads back as the same request.
func TestStoredParamsAreRFC8785(t *testing.T) {
	t.Parallel()
	public := payments.Ref{Public: ids.New()}
	for _, ref := range []string{"1", ids.Format(ids.Payment, public.Public)} {
		for _, body := range []string{`{}`, `{"amount":99999999}`, `{"reason":null}`, `{"amount":1,"reason":"duplicate"}`,
			`{"reason":"fraudulent"}`, `{"amount":null,"reason":"requested_by_customer"}`} {
			p, errs := refunds.DecodeParams([]byte(body), ref)
			require.Empty(t, errs, body)
			params, errs := refunds.Decode([]byte(body), func(string) string { return ref })
			require.Empty(t, errs, body)
			canonical, _, err := idempotency.Fingerprint("POST", "/payments/{id}/refunds", params)
			require.NoError(t, err)

			marshalled, err := json.Marshal(p)
			require.NoError(t, err)
			want, err := jcs.Transform(marshalled)
			require.NoError(t, err)
			require.Equal(t, string(want), string(canonical), body)

			var back refunds.Params
			require.NoError(t, json.Unmarshal(canonical, &back))
			require.Equal(t, *p, back, body)
		}
	}
}
