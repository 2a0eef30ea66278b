// Package bare is the bare service, the yardstick of `make bench`: the least
// a POST /payments with an Idempotency-Key can do around its SQL. A
// replay is one indexed read; a fresh payment is the same two commits as the
// service's, around the same stripe-go call to the same Stripe emulator. It
// has no validation, fingerprint, lease renewal, outbox worker, metrics or
// logs: it is not safe to serve anything, and the service never uses it.
//
// It runs one of two SQLs, chosen when it starts: the service's own
// (ownSQL, on the service's schema), the yardstick of the engine's cost,
// or the least SQL that does the job (leastSQL, on a schema of its own,
// harness/bench/least), the yardstick of the design's. Everything else,
// the HTTP handling, the stripe-go call, the pool, is the same for both,
// so that the two read apart only by their SQL. Each must stay statement
// for statement with its pgbench scripts (fresh.sql and replay.sql,
// least.sql and least_replay.sql in harness/bench/pgbench), the SQL
// ceilings of the same transactions: change one, change both.
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
	"github.com/paymentsd/paymentsd/harness/bench/least"
	"github.com/paymentsd/paymentsd/harness/profiling"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/ids"
	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
)

// shape is the SQL a bare service runs: ownSQL or leastSQL.
type shape interface {
	// replayRead is the replay's one indexed read of a key by (user,
	// key): its recovery point and stored answer.
	replayRead() string
	// reserve runs the statements of the first transaction: it reserves
	// the key (pgx.ErrNoRows when it exists) and creates the pending
	// payment and its audit record.
	reserve(ctx context.Context, tx pgx.Tx, r *request) (reserved, error)
	// finish runs the statements of the second: the outcome and its
	// audit record, the receipt's job, and the key finished with the
	// answer under the lease.
	finish(ctx context.Context, tx pgx.Tx, res reserved, pi string, headers json.RawMessage, body []byte) error
}

// request is a new payment, decoded.
type request struct {
	user int64
	key  string
	raw  []byte
	p    *params
	in   intent.Intent
}

// reserved is what the first transaction made: the key and its lease (a
// token for ownSQL, the lease's time for leastSQL), and the payment.
type reserved struct {
	keyID     int64
	token     uuid.UUID
	lockedAt  time.Time
	paymentID int64
	publicID  uuid.UUID
	created   time.Time
}

// Server answers POST /payments.
type Server struct {
	sql       shape
	pool      *pgxpool.Pool
	stripe    *client.API
	namespace uuid.UUID
	// users maps API keys to user ids, as the service's warm auth cache.
	users map[string]int64
}

// New returns the bare service over the service's own SQL. It reads the
// deployment's namespace, from which the Stripe keys and metadata derive
// as the service's do.
func New(ctx context.Context, pool *pgxpool.Pool, stripe *client.API, users map[string]int64) (*Server, error) {
	s := &Server{sql: ownSQL{}, pool: pool, stripe: stripe, users: users}
	return s, pool.QueryRow(ctx, "SELECT namespace FROM deployment").Scan(&s.namespace)
}

// NewLeast returns the bare service over the least SQL, creating its
// schema (harness/bench/least) when it does not exist yet. The Stripe call
// is the same as New's, from the same namespace.
func NewLeast(ctx context.Context, pool *pgxpool.Pool, stripe *client.API, users map[string]int64) (*Server, error) {
	if err := least.Create(ctx, pool); err != nil {
		return nil, err
	}
	s, err := New(ctx, pool, stripe, users)
	if err != nil {
		return nil, err
	}
	s.sql = leastSQL{}
	return s, nil
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
	switch err := s.pool.QueryRow(r.Context(), s.sql.replayRead(), user, key).Scan(&point, &code, &headers, &body); {
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
	var res reserved
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		res, err = s.sql.reserve(ctx, tx, &request{user: user, key: key, raw: raw, p: &p, in: in})
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

	body, _ := json.Marshal(payments.View{ID: ids.Format(ids.Payment, res.publicID), Amount: p.Amount, Currency: p.Currency, Status: "succeeded",
		StripePaymentIntentID: &pi.ID, Description: p.Description, CreatedAt: res.created.UTC()})
	body = append(body, '\n')
	headers := map[string]string{"Content-Type": "application/json", "Location": payments.Location(ids.Format(ids.Payment, res.publicID))}
	// Marshalled here, as pgx would: in exec and simple_protocol mode pgx
	// is not told the parameter's type, and cannot encode a map.
	stored, _ := json.Marshal(headers)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return s.sql.finish(ctx, tx, res, pi.ID, json.RawMessage(stored), body)
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
// package documentation). With leastSQL it runs the least SQL (NewLeast),
// else the service's own (New).
func Run(ctx context.Context, addr, pprofAddr, dbURL, stripeBase, stripeKey, usersFile string, leastSQL bool) error {
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
	newServer := New
	if leastSQL {
		newServer = NewLeast
	}
	s, err := newServer(ctx, pool.Driver(), charger.Client(), users)
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
