// Package workers is paymentsd's background work, run on River: the receipt
// outbox, the completer that finishes abandoned keys without their client,
// and the reaper that ages finished keys out. Coordination lives in
// Postgres: River elects one leader to schedule the periodic jobs, and the
// phase engine's leases make a key safe to resume from any process.
package workers
