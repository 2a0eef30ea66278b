package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gowebpki/jcs"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/harness/bench"
	"github.com/paymentsd/paymentsd/internal/api"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/idempotency"
	"github.com/paymentsd/paymentsd/internal/ids"
	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

// dbURLOf is the URL of the database pool is connected to.
func dbURLOf(t *testing.T, pool *db.Pool) string {
	t.Helper()
	u, err := bench.DatabaseURL(testutil.AdminURL(t), pool.Driver().Config().ConnConfig.Database)
	require.NoError(t, err)
	return u
}

func count(t *testing.T, pool *db.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n), sql)
	return n
}

// schema is every index and constraint definition of the service's schema,
// with its storage options.
func schema(t *testing.T, pool *db.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT 'index ' || pg_get_indexdef(i.oid) || coalesce(' ' || array_to_string(i.reloptions, ','), '')
		FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
		WHERE i.relnamespace = current_schema()::regnamespace
		UNION ALL
		SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid) || ' ' || convalidated
		FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
		ORDER BY 1`)
	require.NoError(t, err)
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return defs
}

// nullColumns is the set of the row's columns that are NULL, and its jsonb
// columns' member names, for comparing a filled row with one the service
// wrote.
func nullColumns(t *testing.T, pool *db.Pool, table, where string, args ...any) map[string]string {
	t.Helper()
	var row map[string]any
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT to_jsonb(r) FROM "+table+" r WHERE "+where+" LIMIT 1", args...).Scan(&row),
		"%s where %s", table, where)
	shape := map[string]string{}
	for k, v := range row {
		switch v := v.(type) {
		case nil:
			shape[k] = "null"
		case map[string]any:
			keys := make([]string, 0, len(v))
			for m := range v {
				keys = append(keys, m)
			}
			slices.Sort(keys)
			shape[k] = "object " + strings.Join(keys, ",")
		default:
			shape[k] = "set"
		}
	}
	return shape
}

// jsonKeys is the member names of a JSON object.
func jsonKeys(t *testing.T, body []byte) []string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m), "%s", body)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// filledKeyMatch matches the keys a fill made: UUIDv4s, where the service's keys
// in these tests are named real-….
const filledKeyMatch = "idempotency_key ~ '^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'"

type filledKey struct {
	ID       int64
	UserID   int64
	Key      string
	Flow     string
	Path     string
	Params   []byte
	Finger   []byte
	Digest   []byte
	Code     int
	Headers  map[string]string
	Body     []byte
	Finished time.Time
}

func filledKeys(t *testing.T, pool *db.Pool, where string, args ...any) []filledKey {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT id, user_id, idempotency_key, flow, request_path, request_params::text::bytea, request_fingerprint,
		       request_digest, response_code, response_headers, response_body, finished_at
		FROM idempotency_keys WHERE `+filledKeyMatch+` AND `+where+` ORDER BY id`, args...)
	require.NoError(t, err)
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (filledKey, error) {
		var k filledKey
		err := r.Scan(&k.ID, &k.UserID, &k.Key, &k.Flow, &k.Path, &k.Params, &k.Finger, &k.Digest, &k.Code, &k.Headers, &k.Body, &k.Finished)
		return k, err
	})
	require.NoError(t, err)
	return keys
}

// requestOf is the HTTP request a filled key stands for: its path and the
// body a client sends, as the bench sends it.
func requestOf(t *testing.T, k filledKey) (path, body string) {
	t.Helper()
	var params map[string]any
	require.NoError(t, json.Unmarshal(k.Params, &params))
	b, err := bench.ClientBody(params)
	require.NoError(t, err)
	return k.Path, string(b)
}

func post(t *testing.T, svc *testutil.Service, apiKey, path, key, body string) *testutil.Response {
	t.Helper()
	return svc.Do(t, http.MethodPost, path, body,
		"Authorization", "Bearer "+apiKey, "Idempotency-Key", key, "Content-Type", "application/json")
}

func TestFillShape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The service's own reaper keeps every key and tombstone: the test
	// runs one itself.
	opts := testutil.ServiceOptions{Workers: workers.Config{Reaper: workers.ReaperConfig{
		Retention: 10_000 * time.Hour, TombstoneRetention: 10_000 * time.Hour, Interval: time.Hour,
	}}}
	svc := testutil.StartService(t, opts)
	pool := svc.Pool
	dbURL := dbURLOf(t, pool)
	var users []bench.User
	apiKeys := map[int64]string{}
	for range 3 {
		id, key := svc.NewUser(t)
		users = append(users, bench.User{ID: id, APIKey: key})
		apiKeys[id] = key
	}

	// Rows the service writes itself, to hold the filled ones against.
	real := users[0]
	resp := post(t, svc, real.APIKey, "/payments", "real-ok", `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","description":"Order #1"}`)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var paid struct{ ID string }
	require.NoError(t, json.Unmarshal(resp.Body, &paid))
	resp = post(t, svc, real.APIKey, "/payments", "real-declined", `{"amount":1500,"currency":"eur","payment_method":"pm_card_chargeDeclined"}`)
	require.Equal(t, http.StatusPaymentRequired, resp.Status, "%s", resp.Body)
	resp = post(t, svc, real.APIKey, "/payments/"+paid.ID+"/refunds", "real-refund", `{"amount":500,"reason":"requested_by_customer"}`)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	before := schema(t, pool)

	// The service is stopped while the database is filled, as Fill asks,
	// and serves the filled database afterwards.
	require.NoError(t, svc.Stop())
	const keys = 2000
	var log bytes.Buffer
	stats, err := bench.FillWith(ctx, dbURL, users, bench.FillOptions{Keys: keys, ChunkKeys: 300}, &log)
	require.NoError(t, err, "%s", log.String())
	t.Log(log.String())
	opts.Pool = pool
	svc = testutil.StartService(t, opts)

	// What was made: 1 key in 21 a refund, 8% of payments declined, 1%
	// of the keys past the retention; as many tombstones as keys, 1% of
	// them past theirs.
	refundKeys := int64(keys / 21)
	paymentKeys := keys - refundKeys
	declined := 2*(paymentKeys/25) + min(paymentKeys%25, 2)
	require.EqualValues(t, keys, stats.Keys)
	require.Equal(t, paymentKeys, stats.PaymentKeys)
	require.Equal(t, refundKeys, stats.RefundKeys)
	require.Equal(t, declined, stats.Declined)
	require.Equal(t, paymentKeys, stats.Payments)
	require.Equal(t, refundKeys, stats.Refunds)
	require.EqualValues(t, 2*keys, stats.AuditRecords)
	require.Equal(t, paymentKeys-declined, stats.Receipts)
	require.EqualValues(t, keys, stats.StripeEvents)
	require.EqualValues(t, keys, stats.Tombstones)
	require.InDelta(t, keys/100, stats.Backlog, 2)
	require.InDelta(t, keys/100, stats.TombstoneBacklog, 2)
	require.EqualValues(t, keys, count(t, pool, "SELECT count(*) FROM idempotency_keys WHERE "+filledKeyMatch))
	require.EqualValues(t, keys+3, count(t, pool, "SELECT count(*) FROM idempotency_keys"))
	require.EqualValues(t, keys, count(t, pool, "SELECT count(*) FROM idempotency_key_tombstones"))
	require.EqualValues(t, keys, count(t, pool, "SELECT count(*) FROM stripe_events"))

	// The schema is as the migrations left it: the indexes the fill built
	// again have their definitions, options and constraints back.
	require.Equal(t, before, schema(t, pool))

	// Every foreign key holds: each is dropped and added again, which
	// checks every row, in a transaction rolled back.
	rows, err := pool.Query(ctx, `SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
		FROM pg_constraint WHERE contype = 'f' AND connamespace = current_schema()::regnamespace`)
	require.NoError(t, err)
	fks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([3]string, error) {
		var fk [3]string
		return fk, r.Scan(&fk[0], &fk[1], &fk[2])
	})
	require.NoError(t, err)
	require.NotEmpty(t, fks)
	for _, fk := range fks {
		tx, err := pool.Driver().Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DROP CONSTRAINT %s", fk[0], fk[1]))
		require.NoError(t, err)
		_, err = tx.Exec(ctx, fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s %s", fk[0], fk[1], fk[2]))
		require.NoError(t, err, "foreign key %s of %s", fk[1], fk[0])
		require.NoError(t, tx.Rollback(ctx))
	}

	// Keys: finished and released, spread evenly over the users, ids
	// growing with time, the newest created before the anchor and the
	// oldest a retention and a backlog's share of it earlier.
	require.Zero(t, count(t, pool, `SELECT count(*) FROM idempotency_keys WHERE `+filledKeyMatch+`
		AND (recovery_point <> 'finished' OR lock_token IS NOT NULL OR locked_by IS NOT NULL OR runs <> 1
		     OR last_run_at <> finished_at OR finished_at <= created_at OR finished_at > created_at + interval '1 second')`))
	for _, u := range users {
		require.InDelta(t, keys/len(users), count(t, pool, "SELECT count(*) FROM idempotency_keys WHERE user_id = $1 AND "+filledKeyMatch, u.ID), 40)
	}
	require.Zero(t, count(t, pool, `SELECT count(*) FROM (SELECT created_at < lag(created_at) OVER (ORDER BY id) AS back
		FROM idempotency_keys WHERE `+filledKeyMatch+`) k WHERE back`))
	var oldest, newest time.Time
	require.NoError(t, pool.QueryRow(ctx, "SELECT min(created_at), max(created_at) FROM idempotency_keys WHERE "+filledKeyMatch).Scan(&oldest, &newest))
	require.True(t, newest.Before(stats.At), "newest %s, anchor %s", newest, stats.At)
	require.WithinDuration(t, stats.At.Add(-24*time.Hour*100/99), oldest, time.Minute)

	// Sequences are past every filled id: the next payment follows them.
	for _, table := range []string{"idempotency_keys", "payments", "refunds", "audit_records"} {
		require.Zero(t, count(t, pool, fmt.Sprintf(`SELECT count(*) FROM %s WHERE id > (SELECT last_value FROM %[1]s_id_seq)`, table)), table)
	}

	// Payments and refunds agree: amounts given back are their refunds',
	// declined payments are refunded nothing.
	require.Zero(t, count(t, pool, `SELECT count(*) FROM payments p
		WHERE amount_refunded <> amount_reserved
		   OR amount_refunded <> coalesce((SELECT sum(amount) FROM refunds r WHERE r.payment_id = p.id AND r.status = 'succeeded'), 0)`))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM refunds r JOIN payments p ON p.id = r.payment_id
		WHERE p.status <> 'succeeded' OR r.user_id <> p.user_id OR r.currency <> p.currency OR r.created_at <= p.created_at
		   OR p.updated_at < r.updated_at`))
	require.EqualValues(t, refundKeys, count(t, pool, `SELECT count(DISTINCT r.payment_id) FROM refunds r
		JOIN idempotency_keys k ON k.id = r.idempotency_key_id WHERE k.`+filledKeyMatch))

	// Audit records: created and an outcome, per payment and per refund.
	require.Zero(t, count(t, pool, `SELECT count(*) FROM (
		SELECT resource_type, resource_id, array_agg(action ORDER BY id) AS actions FROM audit_records GROUP BY 1, 2) a
		WHERE actions NOT IN ('{payment.created,payment.succeeded}', '{payment.created,payment.failed}',
		                      '{refund.created,refund.succeeded}')`))

	// Rows as the service writes them: the same columns NULL, the same
	// members in each jsonb column and in each answer, as the rows the
	// service wrote for a request of the same kind.
	ns := namespace(t, pool)
	for _, k := range []struct{ name, real, filled string }{
		{"payment", "idempotency_key = 'real-ok'", "response_code = 201 AND flow = 'payment' AND request_params ? 'description'"},
		{"declined", "idempotency_key = 'real-declined'", "response_code = 402 AND NOT request_params ? 'description'"},
		{"refund", "idempotency_key = 'real-refund'", "flow = 'refund' AND request_params ? 'amount' AND request_params ? 'reason'"},
	} {
		var realKey filledKey
		require.NoError(t, pool.QueryRow(ctx, "SELECT id, response_code, response_body FROM idempotency_keys WHERE "+k.real).
			Scan(&realKey.ID, &realKey.Code, &realKey.Body))
		filled := filledKeys(t, pool, k.filled)
		require.NotEmpty(t, filled, k.name)
		filledKey := filled[0]

		require.Equal(t, nullColumns(t, pool, "idempotency_keys", "id = $1", realKey.ID),
			nullColumns(t, pool, "idempotency_keys", "id = $1", filledKey.ID), k.name)
		require.Equal(t, realKey.Code, filledKey.Code, k.name)
		require.Equal(t, jsonKeys(t, realKey.Body), jsonKeys(t, filledKey.Body), k.name)
		table, resource := "payments", "payment"
		if k.name == "refund" {
			table, resource = "refunds", "refund"
		}
		require.Equal(t, nullColumns(t, pool, table, "idempotency_key_id = $1", realKey.ID),
			nullColumns(t, pool, table, "idempotency_key_id = $1", filledKey.ID), k.name)
		for o := range 2 {
			audit := func(keyID int64) map[string]string {
				return nullColumns(t, pool, "audit_records", `(resource_type, resource_id) =
					(SELECT $3, id FROM `+table+` WHERE idempotency_key_id = $1) ORDER BY id OFFSET $2`, keyID, o, resource)
			}
			require.Equal(t, audit(realKey.ID), audit(filledKey.ID), "%s audit record %d", k.name, o)
		}
	}

	// Every filled key: its fingerprint is the one the service computes
	// for its request, and its digest the one of the bytes a client sends
	// (so that replays of filled keys are known by it, as of the service's
	// own), its params are canonical, its intent id is the one package
	// intent derives.
	all := filledKeys(t, pool, "true")
	require.Len(t, all, keys)
	intents := map[int64]string{}
	rows, err = pool.Query(ctx, "SELECT idempotency_key_id, intent_id FROM payments WHERE idempotency_key_id IS NOT NULL UNION ALL SELECT idempotency_key_id, intent_id FROM refunds WHERE idempotency_key_id IS NOT NULL")
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		var intentID string
		require.NoError(t, rows.Scan(&id, &intentID))
		intents[id] = intentID
	}
	require.NoError(t, rows.Err())
	for _, k := range all {
		pattern := "/payments"
		if k.Flow == "refund" {
			pattern = "/payments/{id}/refunds"
		}
		canonical, sum, err := idempotency.Fingerprint(http.MethodPost, pattern, k.Params)
		require.NoError(t, err)
		require.Equal(t, sum, k.Finger, "fingerprint of %s %s", k.Key, k.Params)
		path, body := requestOf(t, k)
		require.Equal(t, idempotency.Digest(http.MethodPost, path, []byte(body)), k.Digest, "digest of %s %s", k.Key, body)
		again, err := jcs.Transform(canonical)
		require.NoError(t, err)
		require.Equal(t, canonical, again)
		require.Equal(t, intent.Intent{Namespace: ns, UserID: k.UserID, Key: k.Key}.ID(), intents[k.ID], k.Key)
		require.Contains(t, k.Headers["Content-Type"], "json", k.Key)
	}

	// A stored answer is what GET answers for its resource, byte for
	// byte, as long as nothing changed since (no refund).
	unchanged := filledKeys(t, pool, `response_code = 201 AND id % 37 = 0 AND NOT EXISTS (
		SELECT 1 FROM payments p WHERE p.idempotency_key_id = idempotency_keys.id AND p.amount_refunded > 0)`)
	require.Greater(t, len(unchanged), 40)
	for _, k := range unchanged {
		got := svc.Do(t, http.MethodGet, k.Headers["Location"], "", "Authorization", "Bearer "+apiKeys[k.UserID])
		require.Equal(t, http.StatusOK, got.Status, "%s", got.Body)
		require.Equal(t, string(k.Body), string(got.Body), k.Key)
	}

	// The reaper's work: 1% of the keys, and 1% of the tombstones.
	readBefore, err := bench.ReadReaper(ctx, dbURL, 24*time.Hour, workers.TombstoneRetentionDefault)
	require.NoError(t, err)
	// (One key in 2,000 comes due every 43 s: a reading a moment later
	// may count one more.)
	require.InDelta(t, stats.Backlog, readBefore.Backlog, 1)
	require.InDelta(t, stats.TombstoneBacklog, readBefore.TombstoneBacklog, 1)
	backlog, err := bench.ReaperBacklog(ctx, dbURL, 24*time.Hour)
	require.NoError(t, err)
	require.InDelta(t, readBefore.Backlog, backlog, 1)
	backlogKeys := filledKeys(t, pool, "finished_at < $1", stats.At.Add(-24*time.Hour))
	require.Len(t, backlogKeys, int(stats.Backlog))

	// Replays: a filled key, sent again by its user with its request,
	// answers its stored answer, marked a replay; the same key with
	// another request is refused.
	sample := filledKeys(t, pool, "(id % 50 = 0 OR response_code = 402 AND id % 10 = 0 OR flow = 'refund' AND id % 3 = 0)")
	require.Greater(t, len(sample), 50)
	sample = append(sample, backlogKeys[0])
	var sawRefund, sawDeclined bool
	for _, k := range sample {
		path, body := requestOf(t, k)
		bodies := []string{body} // known by its digest
		if k.Flow == "payment" {
			// The same request spaced as Postgres prints it: judged by
			// its fingerprint.
			bodies = append(bodies, string(k.Params))
		}
		for _, sent := range bodies {
			resp := post(t, svc, apiKeys[k.UserID], path, k.Key, sent)
			require.Equal(t, k.Code, resp.Status, "%s %s: %s", k.Key, sent, resp.Body)
			require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"), k.Key)
			require.Equal(t, string(k.Body), string(resp.Body), k.Key)
			require.Equal(t, k.Headers["Location"], resp.Header.Get("Location"), k.Key)
		}
		sawRefund = sawRefund || k.Flow == "refund"
		sawDeclined = sawDeclined || k.Code == http.StatusPaymentRequired
	}
	require.True(t, sawRefund && sawDeclined)

	// FilledRequests picks keys to replay from all over the fill, and
	// each replays as picked.
	picked, err := bench.FilledRequests(ctx, dbURL, users, stats, 24*time.Hour, 40)
	require.NoError(t, err)
	require.Len(t, picked, 40)
	pickedUsers := map[int64]bool{}
	for _, r := range picked {
		resp := post(t, svc, r.User.APIKey, r.Path, r.Key, string(r.Body))
		require.Equal(t, r.Status, resp.Status, "%s %s: %s", r.Key, r.Body, resp.Body)
		require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"), r.Key)
		pickedUsers[r.User.ID] = true
	}
	require.Len(t, pickedUsers, len(users))
	var first, last time.Time
	require.NoError(t, pool.QueryRow(ctx, "SELECT min(finished_at), max(finished_at) FROM idempotency_keys WHERE idempotency_key = ANY ($1)",
		[]string{picked[0].Key, picked[len(picked)-1].Key}).Scan(&first, &last))
	require.WithinDuration(t, stats.At.Add(-22*time.Hour), first, 5*time.Minute, "the oldest picked is 22 h old")
	require.WithinDuration(t, stats.At, last, 5*time.Minute, "the newest picked is among the newest")
	k := sample[0]
	resp = post(t, svc, apiKeys[k.UserID], "/payments", k.Key, `{"amount":1,"currency":"usd","payment_method":"pm_card_visa"}`)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	require.Contains(t, string(resp.Body), "idempotency-key-reused")

	// A new payment after the fill gets the next row id.
	resp = post(t, svc, real.APIKey, "/payments", "after-fill", `{"amount":700,"currency":"usd","payment_method":"pm_card_visa"}`)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var after struct{ ID string }
	require.NoError(t, json.Unmarshal(resp.Body, &after))
	public, err := ids.Parse(ids.Payment, after.ID)
	require.NoError(t, err)
	var rowID int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT id FROM payments WHERE public_id = $1", public).Scan(&rowID))
	require.Equal(t, stats.LastPaymentID+1, rowID)

	// The reaper moves the backlog to tombstones and deletes the expired
	// tombstones, and the reading says so.
	reaper := &workers.ReaperWorker{Pool: pool, Config: workers.ReaperConfig{Retention: 24 * time.Hour, BatchSize: 7}, Log: testutil.Logger(t)}
	reaped, err := reaper.RunOnce(ctx)
	require.NoError(t, err)
	require.InDelta(t, readBefore.Backlog, reaped, 1)
	readAfter, err := bench.ReadReaper(ctx, dbURL, 24*time.Hour, workers.TombstoneRetentionDefault)
	require.NoError(t, err)
	require.LessOrEqual(t, readAfter.Backlog, int64(1))
	require.LessOrEqual(t, readAfter.TombstoneBacklog, int64(1))
	window, err := bench.ReaperBetween(ctx, dbURL, readBefore, readAfter)
	require.NoError(t, err)
	require.Equal(t, reaped, window.Reaped)
	require.EqualValues(t, 1, window.Created, "the payment after the fill")
	require.Equal(t, reaped+readAfter.Backlog-readBefore.Backlog, window.Due)
	require.True(t, window.KeepsUp(time.Minute))
	require.Positive(t, window.ReapedPerSecond())
	expired := keys - count(t, pool, "SELECT count(*) FROM idempotency_key_tombstones WHERE reaped_at <= $1", readBefore.At)
	require.InDelta(t, stats.TombstoneBacklog, expired, 1)
	require.EqualValues(t, reaped, count(t, pool, `SELECT count(*) FROM idempotency_key_tombstones t
		LEFT JOIN payments p ON t.resource_type = 'payment' AND p.id = t.resource_id AND p.user_id = t.user_id AND p.idempotency_key_id IS NULL
		LEFT JOIN refunds r ON t.resource_type = 'refund' AND r.id = t.resource_id AND r.user_id = t.user_id AND r.idempotency_key_id IS NULL
		WHERE t.reaped_at > $1 AND coalesce(p.id, r.id) IS NOT NULL`, readBefore.At))
	// A late retry of a reaped key is refused as expired, not run again.
	path, body := requestOf(t, backlogKeys[0])
	resp = post(t, svc, apiKeys[backlogKeys[0].UserID], path, backlogKeys[0].Key, body)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s", resp.Body)
	require.Contains(t, string(resp.Body), "idempotency-key-expired")

	// Sizes: every table and index of the schema.
	sizes, err := bench.Sizes(ctx, dbURL)
	require.NoError(t, err)
	byName := map[string]bench.RelationSize{}
	for _, s := range sizes {
		byName[s.Name] = s
	}
	for _, def := range before {
		if name, ok := strings.CutPrefix(def, "index CREATE "); ok {
			name = strings.Fields(strings.TrimPrefix(name, "UNIQUE "))[1]
			require.Contains(t, byName, name)
			require.Equal(t, "index", byName[name].Kind)
			require.Positive(t, byName[name].IndexBytes)
		}
	}
	keysSize := byName["idempotency_keys"]
	require.Equal(t, "table", keysSize.Kind)
	require.InDelta(t, keys+4-stats.Backlog, keysSize.Rows, float64(keys)/20)
	require.Equal(t, keysSize.HeapBytes+keysSize.IndexBytes, keysSize.TotalBytes)
	require.EqualValues(t, 3, byName["users"].Rows)
	require.True(t, byName["users"].RowsExact)
	var table strings.Builder
	require.NoError(t, bench.WriteRelationSizes(&table, sizes))
	require.Contains(t, table.String(), "idempotency_keys_user_id_idempotency_key_key")
}

func namespace(t *testing.T, pool *db.Pool) uuid.UUID {
	t.Helper()
	var ns uuid.UUID
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT namespace FROM deployment").Scan(&ns))
	return ns
}

// TestFillTwice fills a database twice: the second fill names other keys
// and ids, and both replay.
func TestFillTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testutil.NewDB(t)
	users := newUsers(t, pool, 2)
	dbURL := dbURLOf(t, pool)
	first, err := bench.FillWith(ctx, dbURL, users, bench.FillOptions{Keys: 100, Tombstones: 30, Workers: 1}, nil)
	require.NoError(t, err)
	second, err := bench.FillWith(ctx, dbURL, users, bench.FillOptions{Keys: 100, Tombstones: -1, Backlog: -1}, nil)
	require.NoError(t, err)
	require.EqualValues(t, 100, second.Keys)
	require.Zero(t, second.Backlog)
	require.Zero(t, second.Tombstones)
	require.Greater(t, second.FirstKeyID, first.LastKeyID)
	require.Greater(t, second.FirstPaymentID, first.LastPaymentID)
	require.EqualValues(t, 200, count(t, pool, "SELECT count(*) FROM idempotency_keys"))
	require.EqualValues(t, 30, count(t, pool, "SELECT count(*) FROM idempotency_key_tombstones"))
}

// TestFillFailsWithItsIndexes: a fill that fails half way leaves the
// schema as it found it, the indexes it had dropped built again.
func TestFillFailsWithItsIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testutil.NewDB(t)
	users := newUsers(t, pool, 2)
	before := schema(t, pool)
	// A payment in the way of the ids the fill takes.
	_, err := pool.Exec(ctx, "INSERT INTO payments (id, user_id, amount, currency, payment_method) VALUES (10, $1, 100, 'usd', 'pm_card_visa')", users[0].ID)
	require.NoError(t, err)
	var log bytes.Buffer
	_, err = bench.FillWith(ctx, dbURLOf(t, pool), users, bench.FillOptions{Keys: 100, Tombstones: -1}, &log)
	require.ErrorContains(t, err, "payments_pkey")
	require.Equal(t, before, schema(t, pool), "%s", log.String())
	require.NotContains(t, log.String(), "unfit")
}

func TestFillRefusesNothingToDo(t *testing.T) {
	t.Parallel()
	_, err := bench.Fill(context.Background(), "postgres://nowhere.invalid/x", []bench.User{{ID: 1}}, 0, nil)
	require.ErrorContains(t, err, "keys")
	_, err = bench.Fill(context.Background(), "postgres://nowhere.invalid/x", nil, 10, nil)
	require.ErrorContains(t, err, "users")
}

func newUsers(t *testing.T, pool *db.Pool, n int) []bench.User {
	t.Helper()
	var users []bench.User
	for i := range n {
		key := api.NewAPIKey()
		u, err := dbsqlc.New().UserInsert(context.Background(), pool, &dbsqlc.UserInsertParams{
			Email: fmt.Sprintf("fill-%d@example.com", i), ApiKeyHash: api.HashAPIKey(key),
		})
		require.NoError(t, err)
		users = append(users, bench.User{ID: u.ID, Email: u.Email, APIKey: key})
	}
	return users
}

// TestFillLarge is the opt-in fill of the issue: BENCH_FILL_KEYS keys (say
// 10000000) into a database of its own, dropped at the end, with the time
// it took, the sizes, and one reaper run over the backlog. Run it alone:
//
//	BENCH_FILL_KEYS=10000000 go -C harness test -run TestFillLarge -timeout 2h -v ./bench/
func TestFillLarge(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BENCH_FILL_KEYS"))
	if n <= 0 {
		t.Skip("set BENCH_FILL_KEYS to the number of keys to fill (an opt-in run of minutes)")
	}
	ctx := context.Background()
	pool := testutil.NewDB(t)
	users := newUsers(t, pool, 8)
	dbURL := dbURLOf(t, pool)
	stats, err := bench.Fill(ctx, dbURL, users, n, testWriter{t})
	require.NoError(t, err)
	t.Logf("%+v", stats)
	sizes, err := bench.Sizes(ctx, dbURL)
	require.NoError(t, err)
	var table strings.Builder
	require.NoError(t, bench.WriteRelationSizes(&table, sizes))
	t.Log("\n" + table.String())

	before, err := bench.ReadReaper(ctx, dbURL, 24*time.Hour, workers.TombstoneRetentionDefault)
	require.NoError(t, err)
	reaper := &workers.ReaperWorker{Pool: pool, Config: workers.ReaperConfig{Retention: 24 * time.Hour}, Log: testutil.Logger(t)}
	start := time.Now()
	reaped, err := reaper.RunOnce(ctx)
	require.NoError(t, err)
	took := time.Since(start)
	after, err := bench.ReadReaper(ctx, dbURL, 24*time.Hour, workers.TombstoneRetentionDefault)
	require.NoError(t, err)
	t.Logf("one reaper run (default batches): reaped %d keys in %s (%.0f keys/s); backlog %d → %d keys, %d → %d tombstones",
		reaped, took.Round(time.Millisecond), float64(reaped)/took.Seconds(), before.Backlog, after.Backlog, before.TombstoneBacklog, after.TombstoneBacklog)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
