package refunds_test

import (
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/phases/refunds"
)

// TestCanonicalIsRFC8785 checks that a refund's canonical params are what
// RFC 8785 makes of their JSON encoding, which is how keys stored before
// Canonical were fingerprinted, for every shape a refund request takes.
func TestCanonicalIsRFC8785(t *testing.T) {
	t.Parallel()
	amount := int64(99_999_999)
	for _, p := range []refunds.Params{{PaymentID: 1}, {PaymentID: 42, Amount: &amount}} {
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
