package workers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// EnqueueReceipt puts a succeeded payment's receipt in the outbox; the
// payment flow, the webhook settler and the operator's resolver call it in
// the transaction that records the success: the transactional outbox.
func EnqueueReceipt(ctx context.Context, tx db.Tx, paymentID int64) error {
	if err := dbsqlc.New().ReceiptEnqueue(ctx, tx, paymentID); err != nil {
		return fmt.Errorf("error enqueuing receipt: %w", err)
	}
	return nil
}

// Receipt is what a Deliverer sends.
type Receipt struct {
	PaymentID int64
	UserID    int64
	Amount    int64
	Currency  string
}

// Deliverer sends a receipt to its user. A fork points it at email; the
// default writes a log line. Delivery is at least once: a process that dies
// after delivering and before committing its batch delivers again.
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

// DispatcherConfig tunes the receipt dispatcher.
type DispatcherConfig struct {
	// Interval is how long the dispatcher waits after finding the outbox
	// empty, which bounds how late a receipt goes out. Defaults to 200ms.
	Interval time.Duration
	// BatchSize bounds the receipts one transaction takes, and so how many
	// a crash mid-batch delivers twice. Defaults to 100.
	BatchSize int
	// BatchTimeout bounds how long a batch goes on starting deliveries:
	// past it, the batch records what it delivered and ends, and the rest
	// waits for the next. Defaults to 15s.
	BatchTimeout time.Duration
	// DeliveryTimeout bounds one delivery; one that runs out fails and is
	// put off like any failure. Defaults to BatchTimeout. A batch lasts at
	// most BatchTimeout + DeliveryTimeout.
	DeliveryTimeout time.Duration
}

func (c *DispatcherConfig) setDefaults() {
	if c.Interval <= 0 {
		c.Interval = 200 * time.Millisecond
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.BatchTimeout <= 0 {
		c.BatchTimeout = 15 * time.Second
	}
	if c.DeliveryTimeout <= 0 {
		c.DeliveryTimeout = c.BatchTimeout
	}
}

// Dispatcher drains the receipt outbox: each batch is one transaction that
// locks the receipts due (skipping those another process holds), delivers
// them, records them and deletes them from the outbox. A receipt is
// recorded exactly once, since the outbox row and the receipts row change in
// one commit and receipts are unique per payment; a failed delivery stays in
// the outbox, put off with a backoff.
//
// A River job per receipt cost two more transactions per payment (River's
// fetch and the job's completion); a batch costs one for up to BatchSize
// payments, and a poll that finds nothing writes nothing.
type Dispatcher struct {
	Pool      *db.Pool
	Deliverer Deliverer
	Config    DispatcherConfig
	Log       zerolog.Logger
	// Observe, when set, is told how many receipts each batch delivered
	// and how many failed.
	Observe func(delivered, failed int)
}

// Run drains the outbox until ctx is done: at once while batches come back
// full, otherwise after Interval. A batch under way when ctx is done runs
// to its end (see BatchTimeout), so a shutdown delivers nothing twice.
func (d *Dispatcher) Run(ctx context.Context) {
	d.Config.setDefaults()
	for ctx.Err() == nil {
		// The database gets a bound of its own beyond the batch's.
		batchCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.Config.BatchTimeout+d.Config.DeliveryTimeout+30*time.Second)
		n, err := d.Drain(batchCtx)
		cancel()
		if err != nil {
			d.Log.Warn().Err(err).Msg("receipt batch failed; retrying")
		}
		if n == d.Config.BatchSize && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(d.Config.Interval):
		}
	}
}

// Drain runs one batch and returns how many receipts it took. A delivery
// that fails, runs out of time or panics is put off and the batch goes on;
// past BatchTimeout it starts no more deliveries. Whatever it delivered,
// it records. Only the database failing, or ctx ending, rolls it back.
func (d *Dispatcher) Drain(ctx context.Context) (int, error) {
	d.Config.setDefaults()
	q := dbsqlc.New()
	var taken, delivered, failed int
	err := db.WithTx(ctx, d.Pool, func(ctx context.Context, tx db.Tx) error {
		rows, err := q.ReceiptOutboxClaim(ctx, tx, int32(d.Config.BatchSize))
		if err != nil {
			return fmt.Errorf("error claiming receipts: %w", err)
		}
		taken, delivered, failed = len(rows), 0, 0
		stop := time.Now().Add(d.Config.BatchTimeout)
		done := make([]int64, 0, len(rows))
		for _, r := range rows {
			if !r.Recorded {
				if time.Now().After(stop) {
					break // the rest is released at commit, for the next batch
				}
				err := d.deliver(ctx, &Receipt{PaymentID: r.PaymentID, UserID: r.UserID, Amount: r.Amount, Currency: r.Currency})
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					failed++
					d.Log.Warn().Err(err).Int64("payment_id", r.PaymentID).Int32("attempts", r.Attempts+1).Msg("receipt delivery failed; retrying later")
					msg := storable(err.Error())
					if err := q.ReceiptOutboxRetry(ctx, tx, &dbsqlc.ReceiptOutboxRetryParams{PaymentID: r.PaymentID, LastError: &msg}); err != nil {
						return fmt.Errorf("error putting a receipt off: %w", err)
					}
					continue
				}
				delivered++
			}
			done = append(done, r.PaymentID)
		}
		if len(done) == 0 {
			return nil
		}
		if err := q.ReceiptsRecord(ctx, tx, done); err != nil {
			return fmt.Errorf("error recording receipts: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if d.Observe != nil && taken > 0 {
		d.Observe(delivered, failed)
	}
	return taken, nil
}

// deliver sends one receipt within DeliveryTimeout; a Deliverer's panic is
// a failed delivery, not the end of the process.
func (d *Dispatcher) deliver(ctx context.Context, r *Receipt) (err error) {
	ctx, cancel := context.WithTimeout(ctx, d.Config.DeliveryTimeout)
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("deliverer panicked: %v", v)
		}
	}()
	return d.Deliverer.Deliver(ctx, r)
}

// storable is an error message as a text column takes it: valid UTF-8
// without NUL (a mail server may answer in Latin-1), at most 1000 bytes.
func storable(msg string) string {
	msg = strings.ReplaceAll(strings.ToValidUTF8(msg, "\uFFFD"), "\x00", "")
	if len(msg) > 1000 {
		msg = strings.ToValidUTF8(msg[:1000], "")
	}
	return msg
}

// LegacyReceiptArgs is the River job by which versions before the receipt
// outbox enqueued a receipt. During a rolling upgrade a process of such a
// version may still enqueue one after migration 00015 moved the others, so
// LegacyReceiptWorker moves each into the outbox. Remove both once no
// process of those versions can be running.
type LegacyReceiptArgs struct {
	PaymentID int64 `json:"payment_id"`
}

// Kind names the job in River, as the previous versions named it.
func (LegacyReceiptArgs) Kind() string { return "receipt" }

// LegacyReceiptWorker moves a receipt job of a previous version into the
// outbox (the dispatcher skips a payment whose receipt is recorded).
type LegacyReceiptWorker struct {
	river.WorkerDefaults[LegacyReceiptArgs]
	Pool *db.Pool
}

// Work moves one receipt job into the outbox.
func (w *LegacyReceiptWorker) Work(ctx context.Context, job *river.Job[LegacyReceiptArgs]) error {
	if err := dbsqlc.New().ReceiptEnqueue(ctx, w.Pool, job.Args.PaymentID); err != nil {
		return fmt.Errorf("error moving a receipt job into the outbox: %w", err)
	}
	return nil
}
