package webhooks_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestEventLookupsReadOnlyUnresolvedIntents checks the plans of the
// webhook's lookups, PaymentLockForEvent and RefundLockForEvent, as the
// prepared statements' generic plans, on tables where most rows have their
// Stripe id: the Stripe id is looked up in its unique index, the intent in
// the partial index of rows without one (migration 00017), and neither
// table is scanned.
func TestEventLookupsReadOnlyUnresolvedIntents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testutil.NewDB(t)
	_, err := pool.Exec(ctx, `
		INSERT INTO users (email, api_key_hash) VALUES ('plan@example.com', sha256('plan'::bytea));
		INSERT INTO payments (user_id, intent_id, amount, currency, payment_method, status, stripe_payment_intent_id)
		SELECT (SELECT id FROM users), md5(n::text), 1000, 'usd', 'pm_card_visa',
		       CASE WHEN n % 500 = 0 THEN 'pending' ELSE 'succeeded' END,
		       CASE WHEN n % 500 = 0 THEN NULL ELSE 'pi_' || md5(n::text) END
		FROM generate_series(1, 20000) AS n;
		INSERT INTO refunds (user_id, payment_id, payment_public_id, intent_id, amount, currency, stripe_refund_id)
		SELECT p.user_id, p.id, p.public_id, md5('r' || p.id), 1, 'usd',
		       CASE WHEN p.id % 500 = 0 THEN NULL ELSE 're_' || md5(p.id::text) END
		FROM payments AS p WHERE p.stripe_payment_intent_id IS NOT NULL;
		ANALYZE payments, refunds`)
	require.NoError(t, err)

	conn, err := pool.Driver().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	// The lookups' WHERE clauses, as they stand in db/queries/stripe_events.sql.
	testutil.GenericPlans(t, conn,
		`PREPARE payment (text, text) AS
		 SELECT id FROM payments
		 WHERE stripe_payment_intent_id = $1 OR (stripe_payment_intent_id IS NULL AND intent_id = $2)
		 ORDER BY (stripe_payment_intent_id IS NOT NULL) DESC, id DESC LIMIT 1`,
		`PREPARE refund (text, text) AS
		 SELECT id FROM refunds
		 WHERE stripe_refund_id = $1 OR (stripe_refund_id IS NULL AND intent_id = $2)
		 ORDER BY (stripe_refund_id IS NOT NULL) DESC, id DESC LIMIT 1`)
	for _, c := range []struct{ stmt, byStripeID, byIntent, table string }{
		{"payment", "payments_stripe_payment_intent_id_key", "payments_intent_id_unresolved_idx", "payments"},
		{"refund", "refunds_stripe_refund_id_key", "refunds_intent_id_unresolved_idx", "refunds"},
	} {
		plan := testutil.Explain(t, conn, `EXECUTE `+c.stmt+`('pi_x', 'x')`)
		require.Contains(t, plan, c.byStripeID, plan)
		require.Contains(t, plan, c.byIntent, plan)
		require.NotContains(t, plan, "Seq Scan on "+c.table, plan)
	}
}
