// Package bare is the bare service, the yardstick of `make bench`: the least
// a POST /payments with an Idempotency-Key can do on paymentsd's schema. A
// replay is one indexed read; a fresh payment is the same two commits as the
// service's, around the same stripe-go call to the same Stripe emulator. It
// has no validation, fingerprint, lease renewal, outbox worker, metrics or
// logs: it is not safe to serve anything, and the service never uses it.
//
// Its SQL must stay statement for statement with
// harness/bench/pgbench/fresh.sql, the SQL ceiling of the same two
// transactions: change one, change both.
//
// # Profiles
//
// It serves Go's profiles (net/http/pprof) only when asked: with a pprof
// address (paymentsd-bare -pprof, which `BENCH_PROFILE=1 make bench` passes
// so that the bare's profiles can be read beside the service's), on a
// listener of its own, with the service's handler (package profiling:
// block and mutex sampling on only while a profile of them is taken), so
// that the two pay alike for being profiled. Without one it opens no
// listener: it costs nothing.
package bare

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/paymentsd/paymentsd/harness/bench"
	"github.com/paymentsd/paymentsd/harness/profiling"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/ids"
	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
)

// The statements, in the order a payment runs them; fresh.sql builds the
// stored answer in SQL where this passes it as a parameter.
const (
	// The replay: the one indexed read (harness/bench/pgbench/replay.sql).
	readKey = `SELECT recovery_point, response_code, response_headers, response_body
FROM idempotency_keys WHERE user_id = $1 AND idempotency_key = $2`

	// Transaction 1: reserve the key with a lease, create the pending
	// payment and its audit record, move the key to payment_created.
	insertKey = `INSERT INTO idempotency_keys (user_id, idempotency_key, flow, request_method, request_path,
    request_params, request_fingerprint, lock_token, locked_by, locked_at)
VALUES ($1, $2::text, 'payment', 'POST', '/payments', $3, sha256($2::text::bytea), gen_random_uuid(), NULL, now())
ON CONFLICT (user_id, idempotency_key) DO NOTHING
RETURNING id, lock_token`
	insertPayment = `WITH payment AS (
    INSERT INTO payments (user_id, idempotency_key_id, intent_id, amount, currency, payment_method, description)
    VALUES ($1, $2, $3, $4, $5, $6, $7)
    RETURNING *
), audit AS (
    INSERT INTO audit_records (user_id, action, resource_type, resource_id, data)
    SELECT p.user_id, 'payment.created', 'payment', p.id,
           jsonb_build_object('status', p.status, 'idempotency_key_id', p.idempotency_key_id)
    FROM payment AS p
)
SELECT id, public_id, created_at FROM payment`
	advanceKey = `UPDATE idempotency_keys SET recovery_point = 'payment_created', locked_at = now(), last_run_at = now()
WHERE id = $1 AND lock_token = $2`

	// Transaction 2: record the PaymentIntent and audit it, enqueue the
	// receipt, finish the key with the answer and release the lease.
	recordPayment = `WITH payment AS (
    UPDATE payments
    SET status = 'succeeded', stripe_payment_intent_id = $2,
        failure_code = NULL, failure_message = NULL, updated_at = now()
    WHERE payments.id = $1
    RETURNING *
), audit AS (
    INSERT INTO audit_records (user_id, action, resource_type, resource_id, data)
    SELECT p.user_id, 'payment.' || p.status, 'payment', p.id,
           jsonb_strip_nulls(jsonb_build_object('status', p.status,
               'stripe_payment_intent_id', p.stripe_payment_intent_id,
               'failure_code', p.failure_code, 'idempotency_key_id', p.idempotency_key_id))
    FROM payment AS p
)
SELECT id FROM payment`
	// Due in a hundred years: the dispatcher of the service running beside
	// must not deliver the bare's receipts.
	enqueueReceipt = `INSERT INTO receipt_outbox (payment_id, run_at) VALUES ($1, now() + interval '100 years')
ON CONFLICT (payment_id) DO NOTHING`
	finishKey = `UPDATE idempotency_keys
SET recovery_point = 'finished', lock_token = NULL, locked_by = NULL, locked_at = NULL,
    last_run_at = now(), finished_at = now(), response_code = 201, response_headers = $3, response_body = $4
WHERE id = $1 AND lock_token = $2`
)

// Server answers POST /payments.
type Server struct {
	pool      *pgxpool.Pool
	stripe    *client.API
	namespace uuid.UUID
	// users maps API keys to user ids, as the service's warm auth cache.
	users map[string]int64
}

// New reads the deployment's namespace, from which the Stripe keys and
// metadata derive as the service's do.
func New(ctx context.Context, pool *pgxpool.Pool, stripe *client.API, users map[string]int64) (*Server, error) {
	s := &Server{pool: pool, stripe: stripe, users: users}
	return s, pool.QueryRow(ctx, "SELECT namespace FROM deployment").Scan(&s.namespace)
}

// Handler routes POST /payments, POST /payments/{id}/refunds (replays
// only: the refunds of a filled database, make bench-fill), and GET
// /healthz for the harness to wait on.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /payments", s.pay)
	mux.HandleFunc("POST /payments/{id}/refunds", s.replayRefund)
	mux.HandleFunc("GET /healthz", func(http.ResponseWriter, *http.Request) {})
	return mux
}

// params is the request body, decoded and nothing more.
type params struct {
	Amount        int64   `json:"amount"`
	Currency      string  `json:"currency"`
	PaymentMethod string  `json:"payment_method"`
	Description   *string `json:"description"`
}

// replay answers a request whose key is known: with the stored answer when
// the key is finished. It reports whether it answered; it did not when the
// key is new.
func (s *Server) replay(w http.ResponseWriter, r *http.Request) (user int64, key string, answered bool) {
	apiKey, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	user, ok := s.users[apiKey]
	if !ok {
		http.Error(w, "unknown API key", http.StatusUnauthorized)
		return 0, "", true
	}
	key = r.Header.Get("Idempotency-Key")
	var (
		point   string
		code    *int
		headers map[string]string
		body    []byte
	)
	switch err := s.pool.QueryRow(r.Context(), readKey, user, key).Scan(&point, &code, &headers, &body); {
	case err == nil && point == "finished":
		answer(w, headers, *code, body, true)
	case err == nil:
		http.Error(w, "in flight", http.StatusConflict)
	case !errors.Is(err, pgx.ErrNoRows):
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		return user, key, false
	}
	return user, key, true
}

// replayRefund answers a refund's replay, the same one indexed read as a
// payment's; it makes no refunds.
func (s *Server) replayRefund(w http.ResponseWriter, r *http.Request) {
	if _, _, answered := s.replay(w, r); !answered {
		http.Error(w, "the bare service only replays refunds", http.StatusNotFound)
	}
}

func (s *Server) pay(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	user, key, answered := s.replay(w, r)
	if answered {
		return
	}

	var p params
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(raw, &p)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	in := intent.Intent{Namespace: s.namespace, UserID: user, Key: key}
	var (
		publicID         uuid.UUID
		keyID, paymentID int64
		token            uuid.UUID
		created          time.Time
	)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, insertKey, user, key, string(raw)).Scan(&keyID, &token); err != nil {
			return err // pgx.ErrNoRows: the key exists
		}
		err := tx.QueryRow(ctx, insertPayment, user, keyID, in.ID(), p.Amount, p.Currency, p.PaymentMethod, p.Description).
			Scan(&paymentID, &publicID, &created)
		if err == nil {
			_, err = tx.Exec(ctx, advanceKey, keyID, token)
		}
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		http.Error(w, "in flight", http.StatusConflict)
		return
	} else if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}

	pi, err := s.charge(ctx, in, &p)
	if err != nil || pi.Status != stripe.PaymentIntentStatusSucceeded {
		// Only the happy path: the key stays behind, unfinished.
		http.Error(w, "the charge did not succeed", http.StatusBadGateway)
		return
	}

	body, _ := json.Marshal(payments.View{ID: ids.Format(ids.Payment, publicID), Amount: p.Amount, Currency: p.Currency, Status: "succeeded",
		StripePaymentIntentID: &pi.ID, Description: p.Description, CreatedAt: created.UTC()})
	body = append(body, '\n')
	headers := map[string]string{"Content-Type": "application/json", "Location": payments.Location(ids.Format(ids.Payment, publicID))}
	// Marshalled here, as pgx would: in exec and simple_protocol mode pgx
	// is not told the parameter's type, and cannot encode a map.
	stored, _ := json.Marshal(headers)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, recordPayment, paymentID, pi.ID)
		if err == nil {
			_, err = tx.Exec(ctx, enqueueReceipt, paymentID)
		}
		if err == nil {
			_, err = tx.Exec(ctx, finishKey, keyID, token, json.RawMessage(stored), body)
		}
		return err
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	answer(w, headers, http.StatusCreated, body, false)
}

// answer writes a stored answer, marked as a replay or not.
func answer(w http.ResponseWriter, headers map[string]string, code int, body []byte, replayed bool) {
	for name, value := range headers {
		w.Header().Set(name, value)
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// charge is the service's call (internal/phases/payments/charge.go, create)
// for a first attempt: the same parameters, Stripe key and metadata.
func (s *Server) charge(ctx context.Context, in intent.Intent, p *params) (*stripe.PaymentIntent, error) {
	params := &stripe.PaymentIntentParams{
		Amount:                stripe.Int64(p.Amount),
		Currency:              stripe.String(p.Currency),
		PaymentMethod:         stripe.String(p.PaymentMethod),
		PaymentMethodTypes:    stripe.StringSlice([]string{"card"}),
		Confirm:               stripe.Bool(true),
		ErrorOnRequiresAction: stripe.Bool(true),
		Description:           p.Description,
	}
	params.Context = ctx
	for k, v := range in.Metadata() {
		params.AddMetadata(k, v)
	}
	params.SetIdempotencyKey(in.StripeKey("pi", 1))
	return s.stripe.PaymentIntents.New(params)
}

// Run serves on addr until ctx is done. The pool is configured as the
// service's (db.ParseConfig: same size), the Stripe client is the service's
// own (payments.NewCharger: retries off, same transport and timeout), and
// usersFile holds `paymentsd users create` lines: the API keys it accepts.
// A non-empty pprofAddr serves the profiles there too (see Profiles in the
// package documentation).
func Run(ctx context.Context, addr, pprofAddr, dbURL, stripeBase, stripeKey, usersFile string) error {
	list, err := bench.ReadUsers(usersFile)
	if err != nil {
		return err
	}
	users := make(map[string]int64, len(list))
	for _, u := range list {
		users[u.APIKey] = u.ID
	}
	cfg, err := db.ParseConfig(dbURL)
	if err != nil {
		return err
	}
	pool, err := db.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	charger := payments.NewCharger(payments.StripeConfig{SecretKey: stripeKey, APIBase: stripeBase})
	s, err := New(ctx, pool.Driver(), charger.Client(), users)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if pprofAddr != "" {
		if err := profiling.Serve(ctx, pprofAddr); err != nil {
			ln.Close()
			return err
		}
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
