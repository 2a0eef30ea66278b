-- Layer 4: the payments' lookups the API and the phases read: by public id
-- (GET /payments/{id}), by idempotency key (recovery, replays), by
-- PaymentIntent (webhooks; also the rule that no two payments share one).
-- Each is written at the insert and again at the outcome's update, which
-- sets the PaymentIntent and is therefore not HOT.
ALTER TABLE payments DROP CONSTRAINT payments_idempotency_key_id_key;
DROP INDEX payments_user_id_public_id_key, payments_stripe_payment_intent_id_key;
