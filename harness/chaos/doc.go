// Package chaos is paymentsd's fault run, `make chaos`: it drives real
// clients against several real `paymentsd serve` processes while it breaks
// everything underneath them, and then proves that no client intent was
// charged twice, lost, or answered inconsistently.
//
// # The story of a run
//
//  1. Setup (setup.go, postgres.go, fleet.go, process.go). The harness starts a Postgres cluster of its own
//     (scripts/postgres.sh with PAYMENTSD_PGDATA and PAYMENTSD_PGPORT), so it
//     may restart it; creates a fresh database, paymentsd_chaos; applies the
//     migrations with `paymentsd migrate`; starts the Stripe emulator
//     (bin/stripefake) and -serve `paymentsd serve` processes on
//     distinct ports; and creates a few users with `paymentsd users create`.
//     Every process writes its log under .tmp/chaos-logs/.
//
//  2. Load (client.go, intent.go; run.go orchestrates every step). -clients concurrent clients each loop:
//     a fresh Idempotency-Key and body (a random amount in usd, mostly
//     pm_card_visa, about one in ten pm_card_chargeDeclined), POSTed to a
//     random serve process and retried with the same key and body, with
//     exponential backoff and jitter and honouring Retry-After, until a
//     definite answer (201, 402, or a 400 payment-rejected). About 15% of
//     intents give up after one or two attempts, leaving the key for the
//     completer to finish. Every intent is recorded before its first send.
//
//  3. Faults (controller.go, emulator.go). The emulator fails PaymentIntent
//     creates at random, as Stripe documents it may: 500s, 500s that did
//     charge, answers lost after the charge, hangs longer than paymentsd's
//     Stripe timeout, creates that outlive their client, latency, and a
//     search index that lags writes. A controller SIGKILLs a
//     random serve process every -kill-every (±20%) and restarts it a second
//     or two later, and restarts Postgres once (stop -m fast, start) in the
//     middle of the run. A supervisor restarts any serve process that exits
//     on its own, as systemd would. It also loses history (lost_history.go,
//     below) every -lost-every. Every injection is logged with a timestamp
//     (events.go).
//
//  4. Drain (drain.go). At the end of -duration the controller stops, the
//     emulator's faults are turned off and its hung requests released, every
//     serve process is brought up and made ready, clients start no new
//     intents (they may finish the one they hold), and the harness waits,
//     within -drain, until no idempotency key is unfinished (bar those
//     parked for an operator, which are counted and listed) and no receipt
//     job is pending.
//
//  5. Verdict (snapshot.go, invariants.go, check.go, report.go). The harness reads the
//     keys, payments, receipts and the receipt outbox from Postgres and every
//     PaymentIntent from the emulator, checks the invariants below, prints a
//     table, and exits non-zero on any violation:
//
//  1. every intent has exactly one key row, finished with 201 or 402, or
//     parked for an operator (never charged again);
//
//  2. a 201 has exactly one succeeded PaymentIntent for its payment, which
//     the payment row records as succeeded; a 402 has none and a failed
//     payment; a client that got a definite answer got exactly the stored
//     one (for a key sent again after a loss, the answer to that); the
//     outcome matches the card;
//
//  3. every PaymentIntent names, through the intent in its metadata, a
//     payment of this deployment, and no payment has two succeeded
//     PaymentIntents;
//
//  4. exactly one receipt per succeeded payment and none left in the outbox, and
//     none for a failed one;
//
//  5. every key finished within -drain after the faults stopped;
//
//  6. one Stripe Refund per refund key, which its refund row records, on
//     the payment its client meant; per payment, refunded at Stripe =
//     succeeded refunds <= captured.
//
// Manual payments (-manual, manual.go): a share of the payments is only
// authorized, and its client then captures it whole or in part, asks for
// more than it holds, cancels it, captures and cancels it at once under
// two keys, or leaves it for the emulator to cancel once the authorization
// window (-authorization-window) closes, which its webhook event tells the
// service. Check 11 (manual_invariants.go): one PaymentIntent holds each
// authorization and agrees with its payment row; a capture answered 200
// took what was asked, a cancel answered 200 left nothing captured, a
// refusal had its reason, and per payment at most one capture or cancel
// key won: captured once, never after a cancel.
//
// # Lost history
//
// A restore, or a failover to a standby that lagged, loses the tail of
// commits after some point while Stripe keeps what those requests made.
// Every -lost-every (±20%; lost_history.go) the controller takes a key of
// that tail: a payment whose client is done with it (its refunds too), or
// a refund of one, made within the last -lost-retry-after and leased by no
// run; half the time it prefers a payment whose Stripe key holds a
// replayed 500, which only a lookup can resolve. It deletes, in one
// transaction, everything the key's requests committed: the key, its
// payment, the payment's refunds and their keys, their audit records,
// receipts, outbox rows and receipt jobs (a lost refund alone gives its
// payment back what it reserved and refunded). -lost-retry-after later
// the intent's client sends the key again with the same body until it is
// answered, then the lost refunds, to the payment the key names now; a
// refusal stays final and is not sent again, and a payment handed to an
// operator (503 needs-attention: paymentsd parks a lost key whose
// lookback would list over 10,000 PaymentIntents, which a 10-minute run
// reaches after about eight) keeps its lost refunds waiting for the
// operator too, their Refunds at Stripe without a row. The emulator's search lags
// twice that delay and half a minute (-search-lag-ms, raised to that and
// kept on through the drain), so search never shows the PaymentIntent at
// the retry: only a list reaching back far enough finds it.
//
// The delay is wall time, a quarter of -duration within 10 s and 2m30s:
// the emulator runs as a process of its own, and moving its clock would
// skew it against the database's for every key at once, which paymentsd
// measures and corrects since 70e3608, and which is another fault. A
// 10-minute run therefore sends each lost key again 2m30s after its loss,
// when its PaymentIntent is older than the two minutes the lookup listed
// before the attempt until 70e3608 (the table counts those); a 45 s run
// proves the deletion, the re-adoption and the invariants with an 11 s
// delay, not that lookback. After the drain the harness waits for every
// lost key to come back, then drains again. One more invariant follows:
//
//  10. every lost key was sent again and answered as before the loss: the
//     same status and the same PaymentIntent or Refund (under a new payment
//     id, with its receipt sent again), and still only one at Stripe; a
//     decline or refusal again, nothing charged or refunded; or parked for
//     an operator. The table counts the faults and how each key ended:
//     re-adopted, not charged, charged anew (nothing at Stripe before the
//     loss), parked, refusal kept.
//
// # Failover runs
//
// With -failover sync or async (CHAOS_FAILOVER; failover.go, lost.go,
// resend.go) the harness runs a primary and a streaming standby made from it
// with `pg_basebackup -R`, each a cluster of its own (.tmp/chaos-failover-*),
// and the serve processes use both hosts with target_session_attrs=read-write.
// Half way through, instead of the Postgres restart, the controller stops the
// primary with `pg_ctl stop -m immediate` and -promote-after later promotes
// the standby (`pg_ctl promote`); the serve processes are left to find the
// new primary by themselves. A synchronous standby
// (synchronous_standby_names on the primary) has every commit before it is
// acknowledged. An asynchronous one may lag: -replication-cut before the
// stop its WAL receiver is cut off, so the last seconds of commits, answers
// clients already hold among them, are lost.
//
// A failover run injects no lost history unless -lost-every is given: it
// loses its own. After the drain a reconciling client sends again every key whose answer
// the database lost (but a refund's refusal, final for its client), every
// key it had acknowledged storing and lost, and every key Stripe holds an
// object for but the database does not; a refund goes to the payment its
// payment key names now. Two more invariants follow:
//
//  7. no definite answer lost (sync); each lost one (async) answered the
//     same again, with the same PaymentIntent or Refund, and still only one
//     at Stripe: re-adopted, not charged or refunded again; a lost refusal,
//     nothing refunded;
//
//  8. the service recovered by itself: a payment was answered 201 after the
//     promotion (the time from the primary's stop to it is the time to
//     recover), no serve process up at the stop exited on its own, each
//     running one heartbeats, River has a leader, its completer ran and a
//     receipt went out on the new primary.
//
// With -failover patroni-sync or patroni-async (patroni.go,
// scripts/patroni.sh) the cluster is etcd, three Patroni nodes and HAProxy
// routing on Patroni's /primary, which the service's URL names; instead of
// a promotion at a chosen instant the controller, in turn, SIGKILLs the
// leader's Patroni and postmaster, SIGKILLs only the leader's Patroni (its
// Postgres stays up and writable, HAProxy must route away), and runs
// `patronictl switchover`; Patroni elects, and the report times each event.
// The home-made modes kill nothing Patroni would see and promote at an
// instant the harness picks, after cutting an asynchronous standby off on
// purpose: they prove the multi-host URL and the loss and re-adoption of
// answers sharply; the Patroni ones prove the same invariants under a real
// manager's timings, a router, and an old primary left running.
// docs/failover-topologies.md compares their figures.
//
// # Webhooks
//
// With -webhooks (the default; webhooks.go) the emulator sends a signed
// event for every state change to the serve processes' POST
// /webhooks/stripe, in turn, with Stripe's delivery faults: late, twice,
// out of order, a first attempt lost (-p-webhook-*); deliveries that meet a
// killed process or a restarting Postgres are retried. After the drain the
// harness waits for the last deliveries, the report counts events
// delivered, applied, ignored (and why) and duplicated, and one more
// invariant follows:
//
//  9. every event the emulator made was delivered, and every event it
//     delivered is recorded exactly once in stripe_events (bar, in an
//     asynchronous failover, those the lost commits took with them),
//     applied or ignored; an alarm passes only for a PaymentIntent or
//     Refund whose payment or refund the run lost on purpose (a failover,
//     lost history: failover_alarms.go).
//
// Client choices (users, amounts, cards, give-ups, which process, backoff
// jitter) and the controller's choices (whom to kill, when) come from -seed.
// The interleaving with real processes is not reproducible, but a failure
// names the keys, payments and timestamps to look up in the logs and the
// database, which the harness leaves in place after the run.
package chaos
