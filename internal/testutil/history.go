package testutil

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// FillHistory gives a migrated database the shape a running service's
// tables have, for plan tests: 40,000 keys of 8 users, one in a thousand
// unfinished and one in five thousand of those parked for an operator, the
// rest finished over the last days, each with its payment; a few payments
// of every rarer kind (still without their PaymentIntent, declined, claimed
// by a capture key, made before public ids); most receipts delivered and one
// in a hundred in the outbox; a day's tombstones. Then ANALYZE, so that the
// planner sees those sizes.
func FillHistory(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		INSERT INTO users (email, api_key_hash)
		SELECT 'plan-' || u || '@example.com', sha256(u::text::bytea) FROM generate_series(1, 8) AS u;
		INSERT INTO idempotency_keys (user_id, idempotency_key, flow, request_method, request_path,
		                              request_params, request_fingerprint, recovery_point,
		                              created_at, last_run_at, finished_at, response_code, response_body,
		                              needs_attention_at, needs_attention_kind)
		SELECT u.id, 'k-' || n, 'payment', 'POST', '/payments', '{}', sha256(n::text::bytea),
		       CASE WHEN n % 1000 = 0 THEN 'payment_created' ELSE 'finished' END,
		       now() - make_interval(secs => (40000 - n) * 10),
		       now() - make_interval(secs => (40000 - n) * 10),
		       CASE WHEN n % 1000 = 0 THEN NULL ELSE now() - make_interval(secs => (40000 - n) * 10) END,
		       CASE WHEN n % 1000 = 0 THEN NULL ELSE 201 END,
		       CASE WHEN n % 1000 = 0 THEN NULL ELSE '{}'::bytea END,
		       CASE WHEN n % 5000 = 0 THEN now() END,
		       CASE WHEN n % 5000 = 0 THEN 'conflict' END
		FROM generate_series(1, 40000) AS n
		JOIN users AS u ON u.id = (SELECT min(id) FROM users) + n % 8;
		INSERT INTO payments (user_id, idempotency_key_id, intent_id, amount, currency, payment_method,
		                      status, stripe_payment_intent_id, amount_captured, legacy_id, capture_key_id)
		SELECT k.user_id, k.id, md5(k.id::text), 2000, 'usd', 'pm_card_visa',
		       CASE WHEN k.id % 1000 = 0 THEN 'pending' WHEN k.id % 100 = 1 THEN 'failed' ELSE 'succeeded' END,
		       CASE WHEN k.id % 1000 <> 0 THEN 'pi_' || md5(k.id::text) END,
		       CASE WHEN k.id % 1000 = 0 OR k.id % 100 = 1 THEN 0 ELSE 2000 END,
		       CASE WHEN k.id % 500 = 2 THEN k.id END,
		       CASE WHEN k.id % 2000 = 3 THEN k.id END
		FROM idempotency_keys AS k;
		INSERT INTO receipts (payment_id, user_id, amount, currency)
		SELECT id, user_id, 2000, 'usd' FROM payments WHERE id % 100 <> 0;
		INSERT INTO receipt_outbox (payment_id, run_at)
		SELECT id, now() - interval '1 second' FROM payments WHERE id % 100 = 0;
		INSERT INTO idempotency_key_tombstones (user_id, idempotency_key, request_method, request_path,
		                                        request_fingerprint, response_code, finished_at, reaped_at)
		SELECT (SELECT min(id) FROM users) + n % 8, 't-' || n, 'POST', '/payments', sha256(n::text::bytea), 201,
		       now() - make_interval(secs => (40000 - n) * 10 + 86400),
		       now() - make_interval(secs => (40000 - n) * 10)
		FROM generate_series(1, 40000) AS n;
		ANALYZE users, idempotency_keys, payments, receipts, receipt_outbox, idempotency_key_tombstones`)
	if err != nil {
		t.Fatalf("error filling the history: %v", err)
	}
}
