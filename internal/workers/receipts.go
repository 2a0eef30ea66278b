package workers

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// ReceiptArgs is the outbox job of a successful payment, inserted in the
// transaction that finishes its key.
type ReceiptArgs struct {
	PaymentID int64 `json:"payment_id"`
}

// Kind names the job in River.
func (ReceiptArgs) Kind() string { return "receipt" }

// Receipt is what a Deliverer sends.
type Receipt struct {
	PaymentID int64
	UserID    int64
	Amount    int64
	Currency  string
}

// Deliverer sends a receipt to its user. A fork points it at email; the
// default writes a log line. Delivery is at least once: a process that dies
// after delivering and before committing delivers again.
type Deliverer interface {
	Deliver(ctx context.Context, r *Receipt) error
}

// LogDeliverer delivers receipts as log lines.
type LogDeliverer struct{ Log zerolog.Logger }

// Deliver logs the receipt: amounts and ids, nothing about the card.
func (d LogDeliverer) Deliver(_ context.Context, r *Receipt) error {
	d.Log.Info().Int64("payment_id", r.PaymentID).Int64("user_id", r.UserID).
		Int64("amount", r.Amount).Str("currency", r.Currency).Msg("receipt delivered")
	return nil
}

// ReceiptWorker records and delivers a payment's receipt exactly once: the
// receipts row and the job's completion commit together, and the row is
// unique per payment, so a retried or rescued job writes nothing twice.
type ReceiptWorker struct {
	river.WorkerDefaults[ReceiptArgs]
	Pool      *pgxpool.Pool
	Deliverer Deliverer
}

// Work handles one receipt job.
func (w *ReceiptWorker) Work(ctx context.Context, job *river.Job[ReceiptArgs]) error {
	return db.WithTx(ctx, w.Pool, func(ctx context.Context, tx pgx.Tx) error {
		receipt, err := dbsqlc.New().ReceiptInsert(ctx, tx, job.Args.PaymentID)
		switch err = db.InterpretError(err); {
		case errors.Is(err, db.ErrNotFound):
			// Recorded by an earlier run of this job; nothing to deliver.
		case err != nil:
			return fmt.Errorf("error recording receipt: %w", err)
		default:
			if err := w.Deliverer.Deliver(ctx, &Receipt{
				PaymentID: receipt.PaymentID, UserID: receipt.UserID, Amount: receipt.Amount, Currency: receipt.Currency,
			}); err != nil {
				return fmt.Errorf("error delivering receipt: %w", err)
			}
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}
