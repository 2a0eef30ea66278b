-- Not a layer: the redesign that would make both of a fresh payment's
-- updates HOT and write fewer index entries, kept every lookup it serves,
-- so that `make bench-ablation` can measure what it is worth beside the
-- layers (it runs redesign-fresh.sql on the service's schema with this
-- applied). The service does not adopt it: measured, it buys a few percent
-- of the SQL ceiling (docs/bench-ablation.md).
--
-- The key: no index names a column that finishing a key changes, so the
-- finish can be HOT. The completer's and the per-user cap's unfinished keys
-- move to a table of their own, written in the statements that reserve and
-- finish the key; the reaper would walk the primary key (ids grow with
-- time) instead of an index on finished_at.
DROP INDEX idempotency_keys_unfinished_idx, idempotency_keys_reaper_idx;
CREATE TABLE idempotency_keys_unfinished (
    user_id bigint NOT NULL,
    key_id  bigint NOT NULL,
    PRIMARY KEY (user_id, key_id)
);

-- The payment: no index names a column that recording the outcome changes
-- (the PaymentIntent, the status), so that update can be HOT. A webhook
-- finds its payment by PaymentIntent through a table written with the
-- outcome, and by intent (before the outcome, and a decline's) through one
-- plain index written at insert.
DROP INDEX payments_intent_id_unresolved_idx, payments_intent_id_declined_idx,
    payments_stripe_payment_intent_id_key;
CREATE INDEX payments_intent_id_idx ON payments (intent_id);
CREATE TABLE payment_intents (
    stripe_payment_intent_id text   PRIMARY KEY,
    payment_id               bigint NOT NULL
);
