-- +goose NO TRANSACTION
-- +goose Up
-- Each rule about a single value (an amount's range, a currency's form, a
-- status's names) moves from a table's CHECK constraint into a domain, the
-- value's type: the same rule, refused with the same SQLSTATE (23514), now
-- named for the value (money_amount_range) where it was named for the table
-- (payments_amount_check). The rules about a whole row (a finished key has
-- its answer, a refund never exceeds what was captured) stay CHECKs.
--
-- Why: Postgres reads back, parses and plans every CHECK of a table for
-- each statement that writes it (ExecRelCheck builds them anew for every
-- execution, prepared or not), while a domain's rules are planned once per
-- connection and kept in its type cache. A fresh payment writes the keys
-- and the payments in four statements, each of which rebuilt the table's
-- ten or twelve CHECKs: 13% of Postgres's CPU during fresh.sql (perf,
-- ExecConstraints), 5% with the row rules alone. Measured before this
-- change, fresh.sql at 32 clients on one cluster, the two schemas
-- interleaved eight times: 916 and 1014 payments/s (+11%, this schema
-- ahead in six rounds), the machine busy 2179 and 1980 µs a payment.
--
-- sqlc reads each column as its base type (it does not look inside the DO
-- block), which is the Go type a domain over it has.
--
-- No table is rewritten. A column changes to a domain with no rule yet,
-- which Postgres does in place (the same bytes, the same operator classes,
-- so its indexes are kept); the rule is then added NOT VALID, which checks
-- every value written from then on without scanning what is stored. What
-- is stored passed the CHECK each rule replaces, dropped in the same
-- transaction (the DO block below), so no value escapes either. A run that
-- finds the domains made has nothing left to change there.
--
-- One index is not kept: Postgres builds a partial index whose predicate
-- reads a changed column again, inside that transaction, reading the whole
-- table under the ALTER's lock. So the declined payments' index (00024,
-- its predicate reads status) is dropped in the transaction and built
-- again CONCURRENTLY after it, as 00024 built it. Until then the one query
-- that reads it (PaymentLockDeclinedForIntent, for a rare webhook) scans.
-- +goose StatementBegin
DO $$
BEGIN
    PERFORM set_config('lock_timeout', '5s', true);
    IF to_regtype('money_amount') IS NOT NULL THEN
        -- Done by an earlier run: only the index may be left to build, and
        -- a build that was interrupted leaves it invalid.
        IF EXISTS (SELECT 1 FROM pg_index
                   WHERE indexrelid = to_regclass('payments_intent_id_declined_idx') AND NOT indisvalid) THEN
            DROP INDEX payments_intent_id_declined_idx;
        END IF;
        RETURN;
    END IF;
    DROP INDEX IF EXISTS payments_intent_id_declined_idx;

    CREATE DOMAIN money_amount AS bigint;          -- in the currency's minor unit
    CREATE DOMAIN currency_code AS text;           -- ISO 4217, lowercase, as Stripe writes it
    CREATE DOMAIN client_key AS text;              -- a client's Idempotency-Key
    CREATE DOMAIN sha256_digest AS bytea;
    CREATE DOMAIN attempt_number AS integer;       -- counts a Stripe key's attempts from 1
    CREATE DOMAIN payment_method_ref AS text;      -- Stripe's PaymentMethod, as the client named it
    CREATE DOMAIN description_text AS text;
    CREATE DOMAIN error_text AS text;
    CREATE DOMAIN flow_name AS text;
    CREATE DOMAIN recovery_point_name AS text;
    CREATE DOMAIN attention_kind AS text;
    CREATE DOMAIN payment_status AS text;
    CREATE DOMAIN capture_method AS text;
    CREATE DOMAIN refund_status AS text;
    CREATE DOMAIN refund_reason AS text;

    ALTER TABLE idempotency_keys
        ALTER COLUMN idempotency_key TYPE client_key,
        ALTER COLUMN request_fingerprint TYPE sha256_digest,
        ALTER COLUMN flow TYPE flow_name,
        ALTER COLUMN recovery_point TYPE recovery_point_name,
        ALTER COLUMN last_error TYPE error_text,
        ALTER COLUMN needs_attention_kind TYPE attention_kind;
    ALTER TABLE payments
        ALTER COLUMN amount TYPE money_amount,
        ALTER COLUMN currency TYPE currency_code,
        ALTER COLUMN payment_method TYPE payment_method_ref,
        ALTER COLUMN description TYPE description_text,
        ALTER COLUMN status TYPE payment_status,
        ALTER COLUMN capture_method TYPE capture_method,
        ALTER COLUMN charge_attempt TYPE attempt_number,
        ALTER COLUMN capture_attempt TYPE attempt_number;
    ALTER TABLE refunds
        ALTER COLUMN amount TYPE money_amount,
        ALTER COLUMN currency TYPE currency_code,
        ALTER COLUMN status TYPE refund_status,
        ALTER COLUMN reason TYPE refund_reason,
        ALTER COLUMN refund_attempt TYPE attempt_number;
    ALTER TABLE idempotency_key_tombstones
        ALTER COLUMN idempotency_key TYPE client_key,
        ALTER COLUMN request_fingerprint TYPE sha256_digest;

    ALTER DOMAIN money_amount ADD CONSTRAINT money_amount_range CHECK (VALUE >= 1 AND VALUE <= 99999999) NOT VALID;
    ALTER DOMAIN currency_code ADD CONSTRAINT currency_code_form CHECK (VALUE ~ '^[a-z]{3}$') NOT VALID;
    ALTER DOMAIN client_key ADD CONSTRAINT client_key_length CHECK (char_length(VALUE) >= 1 AND char_length(VALUE) <= 255) NOT VALID;
    ALTER DOMAIN sha256_digest ADD CONSTRAINT sha256_digest_length CHECK (octet_length(VALUE) = 32) NOT VALID;
    ALTER DOMAIN attempt_number ADD CONSTRAINT attempt_number_from_one CHECK (VALUE >= 1) NOT VALID;
    ALTER DOMAIN payment_method_ref ADD CONSTRAINT payment_method_ref_length CHECK (char_length(VALUE) >= 1 AND char_length(VALUE) <= 255) NOT VALID;
    ALTER DOMAIN description_text ADD CONSTRAINT description_text_length CHECK (char_length(VALUE) <= 1000) NOT VALID;
    ALTER DOMAIN error_text ADD CONSTRAINT error_text_length CHECK (char_length(VALUE) <= 1000) NOT VALID;
    ALTER DOMAIN flow_name ADD CONSTRAINT flow_name_form CHECK (VALUE ~ '^[a-z][a-z0-9_]{0,62}$') NOT VALID;
    ALTER DOMAIN recovery_point_name ADD CONSTRAINT recovery_point_name_form CHECK (VALUE ~ '^[a-z][a-z_]{0,62}$') NOT VALID;
    ALTER DOMAIN attention_kind ADD CONSTRAINT attention_kind_known CHECK (VALUE IN ('unknown_outcome', 'conflict')) NOT VALID;
    ALTER DOMAIN payment_status ADD CONSTRAINT payment_status_known
        CHECK (VALUE IN ('pending', 'requires_capture', 'succeeded', 'failed', 'canceled')) NOT VALID;
    ALTER DOMAIN capture_method ADD CONSTRAINT capture_method_known CHECK (VALUE IN ('automatic', 'manual')) NOT VALID;
    ALTER DOMAIN refund_status ADD CONSTRAINT refund_status_known CHECK (VALUE IN ('pending', 'succeeded', 'failed')) NOT VALID;
    ALTER DOMAIN refund_reason ADD CONSTRAINT refund_reason_known
        CHECK (VALUE IN ('duplicate', 'fraudulent', 'requested_by_customer')) NOT VALID;

    ALTER TABLE idempotency_keys
        DROP CONSTRAINT idempotency_keys_idempotency_key_check,
        DROP CONSTRAINT idempotency_keys_request_fingerprint_check,
        DROP CONSTRAINT idempotency_keys_flow_check,
        DROP CONSTRAINT idempotency_keys_recovery_point_check,
        DROP CONSTRAINT idempotency_keys_last_error_check,
        DROP CONSTRAINT idempotency_keys_needs_attention_kind_check;
    ALTER TABLE payments
        DROP CONSTRAINT payments_amount_check,
        DROP CONSTRAINT payments_currency_check,
        DROP CONSTRAINT payments_payment_method_check,
        DROP CONSTRAINT payments_description_check,
        DROP CONSTRAINT payments_status_check,
        DROP CONSTRAINT payments_capture_method_check,
        DROP CONSTRAINT payments_charge_attempt_check,
        DROP CONSTRAINT payments_capture_attempt_check;
    ALTER TABLE refunds
        DROP CONSTRAINT refunds_amount_check,
        DROP CONSTRAINT refunds_currency_check,
        DROP CONSTRAINT refunds_status_check,
        DROP CONSTRAINT refunds_reason_check,
        DROP CONSTRAINT refunds_refund_attempt_check;
    ALTER TABLE idempotency_key_tombstones
        DROP CONSTRAINT idempotency_key_tombstones_idempotency_key_check,
        DROP CONSTRAINT idempotency_key_tombstones_request_fingerprint_check;
END $$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS payments_intent_id_declined_idx
    ON payments (intent_id)
    WHERE status = 'failed' AND stripe_payment_intent_id IS NOT NULL;

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    PERFORM set_config('lock_timeout', '5s', true);
    IF to_regtype('money_amount') IS NULL THEN
        -- Done by an earlier run: only the index may be left to build, and
        -- a build that was interrupted leaves it invalid.
        IF EXISTS (SELECT 1 FROM pg_index
                   WHERE indexrelid = to_regclass('payments_intent_id_declined_idx') AND NOT indisvalid) THEN
            DROP INDEX payments_intent_id_declined_idx;
        END IF;
        RETURN;
    END IF;
    DROP INDEX IF EXISTS payments_intent_id_declined_idx;

    ALTER TABLE idempotency_keys
        ALTER COLUMN idempotency_key TYPE text,
        ALTER COLUMN request_fingerprint TYPE bytea,
        ALTER COLUMN flow TYPE text,
        ALTER COLUMN recovery_point TYPE text,
        ALTER COLUMN last_error TYPE text,
        ALTER COLUMN needs_attention_kind TYPE text,
        ADD CONSTRAINT idempotency_keys_idempotency_key_check
            CHECK (char_length(idempotency_key) >= 1 AND char_length(idempotency_key) <= 255),
        ADD CONSTRAINT idempotency_keys_request_fingerprint_check CHECK (octet_length(request_fingerprint) = 32),
        ADD CONSTRAINT idempotency_keys_flow_check CHECK (flow ~ '^[a-z][a-z0-9_]{0,62}$'),
        ADD CONSTRAINT idempotency_keys_recovery_point_check CHECK (recovery_point ~ '^[a-z][a-z_]{0,62}$'),
        ADD CONSTRAINT idempotency_keys_last_error_check CHECK (char_length(last_error) <= 1000),
        ADD CONSTRAINT idempotency_keys_needs_attention_kind_check
            CHECK (needs_attention_kind IN ('unknown_outcome', 'conflict'));
    ALTER TABLE payments
        ALTER COLUMN amount TYPE bigint,
        ALTER COLUMN currency TYPE text,
        ALTER COLUMN payment_method TYPE text,
        ALTER COLUMN description TYPE text,
        ALTER COLUMN status TYPE text,
        ALTER COLUMN capture_method TYPE text,
        ALTER COLUMN charge_attempt TYPE integer,
        ALTER COLUMN capture_attempt TYPE integer,
        ADD CONSTRAINT payments_amount_check CHECK (amount >= 1 AND amount <= 99999999),
        ADD CONSTRAINT payments_currency_check CHECK (currency ~ '^[a-z]{3}$'),
        ADD CONSTRAINT payments_payment_method_check
            CHECK (char_length(payment_method) >= 1 AND char_length(payment_method) <= 255),
        ADD CONSTRAINT payments_description_check CHECK (char_length(description) <= 1000),
        ADD CONSTRAINT payments_status_check
            CHECK (status IN ('pending', 'requires_capture', 'succeeded', 'failed', 'canceled')),
        ADD CONSTRAINT payments_capture_method_check CHECK (capture_method IN ('automatic', 'manual')),
        ADD CONSTRAINT payments_charge_attempt_check CHECK (charge_attempt >= 1),
        ADD CONSTRAINT payments_capture_attempt_check CHECK (capture_attempt >= 1);
    ALTER TABLE refunds
        ALTER COLUMN amount TYPE bigint,
        ALTER COLUMN currency TYPE text,
        ALTER COLUMN status TYPE text,
        ALTER COLUMN reason TYPE text,
        ALTER COLUMN refund_attempt TYPE integer,
        ADD CONSTRAINT refunds_amount_check CHECK (amount >= 1 AND amount <= 99999999),
        ADD CONSTRAINT refunds_currency_check CHECK (currency ~ '^[a-z]{3}$'),
        ADD CONSTRAINT refunds_status_check CHECK (status IN ('pending', 'succeeded', 'failed')),
        ADD CONSTRAINT refunds_reason_check CHECK (reason IN ('duplicate', 'fraudulent', 'requested_by_customer')),
        ADD CONSTRAINT refunds_refund_attempt_check CHECK (refund_attempt >= 1);
    ALTER TABLE idempotency_key_tombstones
        ALTER COLUMN idempotency_key TYPE text,
        ALTER COLUMN request_fingerprint TYPE bytea,
        ADD CONSTRAINT idempotency_key_tombstones_idempotency_key_check
            CHECK (char_length(idempotency_key) >= 1 AND char_length(idempotency_key) <= 255),
        ADD CONSTRAINT idempotency_key_tombstones_request_fingerprint_check CHECK (octet_length(request_fingerprint) = 32);

    DROP DOMAIN money_amount, currency_code, client_key, sha256_digest, attempt_number, payment_method_ref,
        description_text, error_text, flow_name, recovery_point_name, attention_kind, payment_status,
        capture_method, refund_status, refund_reason;
END $$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS payments_intent_id_declined_idx
    ON payments (intent_id)
    WHERE status = 'failed' AND stripe_payment_intent_id IS NOT NULL;
