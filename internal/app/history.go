package app

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// historyWatch is when the database last found that its history may have
// been lost: a new timeline (a promotion, a point-in-time restore) or a new
// database (a pg_dump restore), as DeploymentObserveHistory records it at
// every heartbeat. The charge path reads it to look fresh keys up before
// their first send (stripeonce.Rules.LostHistoryAt).
type historyWatch struct {
	lost atomic.Int64 // Unix nanoseconds; 0 when never
}

// observe records what the database says now; a failure leaves the last
// reading (the next heartbeat reads again).
func (h *historyWatch) observe(ctx context.Context, pool *db.Pool, log zerolog.Logger) {
	at, err := dbsqlc.New().DeploymentObserveHistory(ctx, pool)
	if err != nil {
		log.Warn().Err(err).Msg("could not read the database's history")
		return
	}
	if at.Unix() == 0 {
		return
	}
	if old := h.lost.Swap(at.UnixNano()); old != at.UnixNano() {
		log.Warn().Time("history_lost_at", at).
			Msg("the database's timeline or identity changed: fresh keys are looked up at Stripe before their first send")
	}
}

// lostAt is the time of the last loss, or the zero time.
func (h *historyWatch) lostAt() time.Time {
	if n := h.lost.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// HistoryLostAt is when the database last found its history may have been
// lost, as this process last read it (the zero time when never).
func (a *App) HistoryLostAt() time.Time { return a.history.lostAt() }
