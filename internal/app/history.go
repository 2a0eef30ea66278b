package app

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// historyWatch is the database's last loss of history: a new timeline (a
// promotion, a point-in-time restore) or a new database (a pg_dump
// restore), as DeploymentObserveHistory records it at every heartbeat: a
// time no later than the loss, and when it was seen. The charge path reads
// them to look fresh keys up before their first send
// (stripeonce.Rules.LostHistoryAt).
type historyWatch struct {
	last atomic.Pointer[historyLoss] // nil when never
}

type historyLoss struct{ at, seenAt time.Time }

// observe records what the database says now; a failure leaves the last
// reading (the next heartbeat reads again).
func (h *historyWatch) observe(ctx context.Context, pool *db.Pool, log zerolog.Logger) {
	row, err := dbsqlc.New().DeploymentObserveHistory(ctx, pool)
	if err != nil {
		log.Warn().Err(err).Msg("could not read the database's history")
		return
	}
	if row.HistoryLostAt.Unix() == 0 {
		return
	}
	loss := &historyLoss{at: row.HistoryLostAt}
	if row.HistoryLossSeenAt.Unix() != 0 {
		loss.seenAt = row.HistoryLossSeenAt
	}
	if old := h.last.Swap(loss); old == nil || !old.at.Equal(loss.at) || !old.seenAt.Equal(loss.seenAt) {
		log.Warn().Time("history_lost_at", loss.at).Time("history_loss_seen_at", loss.seenAt).
			Msg("the database's timeline or identity changed: fresh keys are looked up at Stripe before their first send")
	}
}

// lostAt is a time no later than the last loss, or the zero time.
func (h *historyWatch) lostAt() time.Time {
	if l := h.last.Load(); l != nil {
		return l.at
	}
	return time.Time{}
}

// seenAt is when the last loss was seen, or the zero time (never, or not
// recorded: a loss written by hand, or before migration 00033).
func (h *historyWatch) seenAt() time.Time {
	if l := h.last.Load(); l != nil {
		return l.seenAt
	}
	return time.Time{}
}

// HistoryLostAt is a time no later than the database's last loss of
// history, as this process last read it (the zero time when never).
func (a *App) HistoryLostAt() time.Time { return a.history.lostAt() }

// HistoryLossSeenAt is when the database's last loss of history was seen,
// as this process last read it (the zero time when never or not recorded).
func (a *App) HistoryLossSeenAt() time.Time { return a.history.seenAt() }
