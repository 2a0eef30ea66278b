package refunds_test

import (
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/ids"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/phases/refunds"
)

// TestCanonicalIsRFC8785 checks that a refund's canonical params are what
// RFC 8785 makes of their JSON encoding, which is how keys stored before
// Canonical were fingerprinted, for every shape a refund request takes: of
// a payment by its public id, and by the number of one made before them.
func TestCanonicalIsRFC8785(t *testing.T) {
	t.Parallel()
	amount := int64(99_999_999)
	public := payments.Ref{Public: ids.New()}
	for _, p := range []refunds.Params{{PaymentID: payments.Ref{Legacy: 1}}, {PaymentID: public, Amount: &amount}, {PaymentID: public}} {
		for _, reason := range append([]string{""}, refunds.Reasons...) {
			if reason != "" {
				p.Reason = &reason
			}
			marshalled, err := json.Marshal(&p)
			require.NoError(t, err)
			want, err := jcs.Transform(marshalled)
			require.NoError(t, err)
			require.Equal(t, string(want), string(p.Canonical()))
		}
	}
}
