package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// HotIndexes are the indexes every fresh payment reads or writes at a
// random page: its key in the keys' unique index and in the tombstones',
// its lease token in the index of unfinished keys, its PaymentIntent in the
// payments'. Everything else a payment writes lands at the end of its table
// or index, or in the small index of payments whose outcome is unknown.
var HotIndexes = []string{
	"idempotency_keys_user_id_idempotency_key_key",
	"idempotency_keys_unfinished_idx",
	"idempotency_key_tombstones_pkey",
	"payments_stripe_payment_intent_id_key",
}

// Prewarm is what PrewarmHotIndexes loaded: the bytes of HotIndexes read into
// shared_buffers, or why it could not (Skipped).
type Prewarm struct {
	Bytes   int64  `json:"bytes,omitempty"`
	Skipped string `json:"skipped,omitempty"`
}

// PrewarmHotIndexes loads HotIndexes into the buffer pool of the database
// at dbURL with pg_prewarm. The fill builds its indexes behind the buffer
// pool's back and ends with a checkpoint, so the first runs after it would
// read them from the kernel's cache, or the disk, a page at a time; a
// service that has been taking payments on such a database holds them,
// since every payment touches a random page of each. Without pg_prewarm
// (a server that lacks the extension) nothing is loaded and Skipped says
// why: the runs then measure a cold cache, and the report says so.
func PrewarmHotIndexes(ctx context.Context, dbURL string) (Prewarm, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return Prewarm{}, fmt.Errorf("error connecting to %s: %w", redact(dbURL), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_prewarm`); err != nil {
		return Prewarm{Skipped: fmt.Sprintf("pg_prewarm is not available (%v)", err)}, nil
	}
	var p Prewarm
	for _, index := range HotIndexes {
		var blocks int64
		if err := conn.QueryRow(ctx, `SELECT pg_prewarm($1::regclass, 'buffer')`, index).Scan(&blocks); err != nil {
			return p, fmt.Errorf("error prewarming %s: %w", index, err)
		}
		p.Bytes += blocks * 8192
	}
	return p, nil
}
