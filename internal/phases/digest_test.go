package phases_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/phases"
)

// sent is a request as the HTTP layer hands it over: its digest, and a
// Prepare that counts its calls and gives the fingerprint of what the body
// decodes to.
func (b *bundle) sent(key, digest, decodesTo string, prepared *int) *phases.Request {
	req := &phases.Request{UserID: b.userID, Key: key, Flow: "shipment", Method: "POST", Path: "/shipments"}
	if digest != "" {
		req.Digest = []byte(digest)
	}
	req.Prepare = func(req *phases.Request) error {
		*prepared++
		sum := sha256.Sum256([]byte(decodesTo))
		req.Params, req.Fingerprint = []byte(`{}`), sum[:]
		return nil
	}
	return req
}

// unprepared is a request whose body must not be decoded: its Prepare
// fails the test.
func unprepared(t *testing.T, req *phases.Request) *phases.Request {
	req.Prepare = func(*phases.Request) error {
		t.Error("Prepare was called for a request with its key's digest")
		return errors.New("not to be prepared")
	}
	return req
}

// answering is a bundle whose shipment flow answers at once.
func answering(t *testing.T) *bundle {
	b := setup(t, phases.Config{})
	require.NoError(t, b.register(shipmentFlow(
		finish(phases.Started),
	)))
	return b
}

// storedDigest is the digest key k stored.
func (b *bundle) storedDigest(t *testing.T, k string) []byte {
	t.Helper()
	return keyColumn[[]byte](t, b, k, "request_digest")
}

func TestARequestSentAgainAsItWasIsAnsweredByItsDigest(t *testing.T) {
	t.Parallel()
	b := setup(t, phases.Config{})
	require.NoError(t, b.register(shipmentFlow(
		b.callStep(phases.Started, "courier"),
		finish("shipped"),
	)))
	ctx := context.Background()
	prepared := 0

	// The first request decodes its body, and its key stores the digest.
	b.courier.fail.Store(1)
	_, err := b.engine.Execute(ctx, b.sent("k", "digest-1", "shipment A", &prepared))
	var ambiguous *phases.AmbiguousError
	require.ErrorAs(t, err, &ambiguous)
	require.Equal(t, 1, prepared)
	require.Equal(t, "digest-1", string(b.storedDigest(t, "k")))

	// The same bytes again resume the key without decoding the body, and
	// once it finished, replay it without decoding it.
	res, err := b.engine.Execute(ctx, unprepared(t, b.sent("k", "digest-1", "", &prepared)))
	require.NoError(t, err)
	require.False(t, res.Replayed)
	again, err := b.engine.Execute(ctx, unprepared(t, b.sent("k", "digest-1", "", &prepared)))
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, res.Response.Body, again.Response.Body)
	require.EqualValues(t, 2, b.courier.calls.Load())

	// Another digest proves nothing: the fingerprint decides, and the body
	// is decoded once for it.
	prepared = 0
	again, err = b.engine.Execute(ctx, b.sent("k", "digest-2", "shipment A", &prepared))
	require.NoError(t, err)
	require.True(t, again.Replayed, "the same request written another way")
	require.Equal(t, 1, prepared)
	_, err = b.engine.Execute(ctx, b.sent("k", "digest-3", "shipment B", &prepared))
	require.ErrorIs(t, err, phases.ErrKeyReused)
	_, err = b.engine.Execute(ctx, b.sent("k", "", "shipment B", &prepared))
	require.ErrorIs(t, err, phases.ErrKeyReused, "no digest at all")
	require.Equal(t, 3, prepared)
	require.EqualValues(t, 2, b.courier.calls.Load())
}

func TestAKeyStoredWithoutADigestIsJudgedByItsFingerprint(t *testing.T) {
	t.Parallel()
	b := answering(t)
	ctx := context.Background()
	prepared := 0
	_, err := b.engine.Execute(ctx, b.sent("k", "", "shipment A", &prepared))
	require.NoError(t, err)
	require.Nil(t, b.storedDigest(t, "k"), "a key made without a digest, as every key made before the column was")

	// NULL equals no digest, so none is taken for the one that made it.
	again, err := b.engine.Execute(ctx, b.sent("k", "digest-1", "shipment A", &prepared))
	require.NoError(t, err)
	require.True(t, again.Replayed)
	_, err = b.engine.Execute(ctx, b.sent("k", "digest-1", "shipment B", &prepared))
	require.ErrorIs(t, err, phases.ErrKeyReused)
	require.Equal(t, 3, prepared)
}

func TestARequestThatCannotBePreparedStoresNothing(t *testing.T) {
	t.Parallel()
	b := answering(t)
	ctx := context.Background()
	errInvalid := errors.New("not a valid shipment")
	req := b.sent("k", "digest-1", "", new(int))
	req.Prepare = func(*phases.Request) error { return errInvalid }
	_, err := b.engine.Execute(ctx, req)
	require.ErrorIs(t, err, errInvalid)
	var keys int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys`).Scan(&keys))
	require.Zero(t, keys)

	// A corrected retry under the same key proceeds.
	prepared := 0
	res, err := b.engine.Execute(ctx, b.sent("k", "digest-2", "shipment A", &prepared))
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, 1, prepared)
}
