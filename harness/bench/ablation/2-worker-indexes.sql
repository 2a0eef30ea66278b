-- Layer 2: the partial indexes that serve background work and webhooks,
-- four of them written by every fresh payment: the completer's unfinished
-- keys (idempotency_keys_unfinished_idx, also the per-user cap), the
-- reaper's finished keys, the payments whose PaymentIntent is not recorded
-- yet (a webhook that comes first finds its payment by intent), and the
-- outbox's due rows; and the four a fresh payment does not write (keys
-- needing attention, declined intents, capture keys, legacy ids).
DROP INDEX idempotency_keys_unfinished_idx, idempotency_keys_reaper_idx, idempotency_keys_needs_attention_idx,
    payments_intent_id_unresolved_idx, payments_intent_id_declined_idx, payments_capture_key_id_key,
    payments_user_id_legacy_id_key, receipt_outbox_run_at_idx;
