package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// Key states as `keys list` shows them.
const (
	stateUnfinished     = "unfinished"
	stateInProgress     = "in-progress"
	stateNeedsAttention = "needs-attention"
)

// maxListedKeys bounds one listing.
const maxListedKeys = 10000

// keyLine is one line of `keys list`.
type keyLine struct {
	ID             int64      `json:"id"`
	UserID         int64      `json:"user_id"`
	IdempotencyKey string     `json:"idempotency_key"`
	Request        string     `json:"request"`
	RecoveryPoint  string     `json:"recovery_point"`
	State          string     `json:"state"`
	CreatedAt      time.Time  `json:"created_at"`
	Age            string     `json:"age"`
	Runs           int32      `json:"runs"`
	LastError      *string    `json:"last_error"`
	NeedsAttention *time.Time `json:"needs_attention_since,omitempty"`
}

// keysListCmd prints unfinished keys, one JSON line each, oldest first.
func keysListCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("keys list")
	state := fs.String("state", stateUnfinished, "`STATE` is unfinished (every unfinished key) or needs-attention (only those parked for an operator)")
	user := fs.String("user", "", "only the keys of user `N`")
	args, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noMoreArgs(args); err != nil {
		return err
	}
	if err := oneOf("--state", *state, stateUnfinished, stateNeedsAttention); err != nil {
		return err
	}
	params := &dbsqlc.IdempotencyKeyListUnfinishedParams{NeedsAttentionOnly: *state == stateNeedsAttention, MaxKeys: maxListedKeys}
	if *user != "" {
		id, err := strconv.ParseInt(*user, 10, 64)
		if err != nil || id < 1 {
			return usageErrorf("--user must be a user id (a positive integer), got %q", *user)
		}
		params.UserID = &id
	}
	pool, err := connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	rows, err := dbsqlc.New().IdempotencyKeyListUnfinished(ctx, pool, params)
	if err != nil {
		return fmt.Errorf("error listing keys: %w", err)
	}
	enc := json.NewEncoder(stdout)
	now := time.Now()
	for _, k := range rows {
		line := keyLine{
			ID: k.ID, UserID: k.UserID, IdempotencyKey: k.IdempotencyKey, Request: k.RequestMethod + " " + k.RequestPath,
			RecoveryPoint: k.RecoveryPoint, State: stateUnfinished, CreatedAt: k.CreatedAt.UTC(),
			Age: now.Sub(k.CreatedAt).Round(time.Second).String(), Runs: k.Runs, LastError: k.LastError,
			NeedsAttention: k.NeedsAttentionAt,
		}
		switch {
		case k.NeedsAttentionAt != nil:
			line.State = stateNeedsAttention
		case k.Leased:
			line.State = stateInProgress
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return nil
}

// keysResolveCmd settles a key that awaits an operator, after checking the
// operator's word against Stripe.
func keysResolveCmd(ctx context.Context, args []string, stdout io.Writer, log zerolog.Logger) error {
	fs := newFlagSet("keys resolve")
	as := fs.String("as", "", "`HOW` the key was settled: charged or not-charged (required)")
	pi := fs.String("payment-intent", "", "with --as charged: the PaymentIntent `PI` that charged; for a refund key, the Stripe Refund that refunded; "+
		"for a capture or cancel key, the payment's PaymentIntent, captured (not-charged: not captured)")
	args, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return usageErrorf("missing the key ID (the id of a keys list line)")
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id < 1 {
		return usageErrorf("the key ID must be a positive integer, got %q", args[0])
	}
	if err := noMoreArgs(args[1:]); err != nil {
		return err
	}
	switch {
	case *as == "":
		return usageErrorf("--as is required: charged or not-charged")
	case *as == "charged" && *pi == "":
		return usageErrorf("--as charged needs --payment-intent")
	case *as == "not-charged" && *pi != "":
		return usageErrorf("--as not-charged takes no --payment-intent")
	}
	if err := oneOf("--as", *as, "charged", "not-charged"); err != nil {
		return err
	}
	a, closeApp, err := offlineApp(ctx, log)
	if err != nil {
		return err
	}
	defer closeApp()
	resp, err := a.Resolve(ctx, id, *pi)
	if errors.Is(err, phases.ErrNotAwaitingOperator) {
		return fmt.Errorf("key %d does not await an operator (see paymentsd keys list --state needs-attention)", id)
	}
	if err != nil {
		return err
	}
	log.Info().Int64("idempotency_key_id", id).Str("as", *as).Int("status", resp.Status).Msg("key resolved by an operator")
	return json.NewEncoder(stdout).Encode(struct {
		ID     int64           `json:"id"`
		As     string          `json:"as"`
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
	}{id, *as, resp.Status, resp.Body})
}
