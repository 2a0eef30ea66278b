-- The least schema that does a payment's job, a yardstick of `make bench`
-- and nothing else: the service never reads or writes it. It is the shape
-- of Brandur Leach's atomic phases (rocket-rides-atomic), written for
-- paymentsd's job: the idempotency key with its unique index, the payment,
-- an audit row per change, a staged job (the outbox) and the stored answer
-- on the key. It lives in a schema of its own, leastsql, so that it can
-- never collide with the service's tables in the bench database; only the
-- users are the service's (public.users), as every table here is keyed by
-- user.
--
-- Five indexes, each for a query the job runs (harness/bench/pgbench/least.sql
-- and least_replay.sql, harness/bench/bare/least.go):
--   idempotency_keys_pkey       the finishing update (by id, under the lease)
--   idempotency_keys_user_key   the reserve's ON CONFLICT and the replay's read
--   payments_pkey               recording the outcome; GET /payments/{id}
--   audit_records_pkey          none on the request path: the trail's identity,
--                               as Brandur's schema has it
--   staged_jobs_pkey            the job worker taking and deleting jobs in order
-- No column an update changes is indexed, so every update can be HOT when
-- its page has room. Fill factors stay Postgres's defaults: this is the
-- plain shape, not a tuned one.
--
-- The key points at its payment (payment_id), not the payment at its key,
-- so that resuming a key finds its payment by primary key and reaping a key
-- leaves its payment alone: no index on the payment for either.
CREATE SCHEMA IF NOT EXISTS leastsql;

CREATE TABLE IF NOT EXISTS leastsql.payments (
    -- The public id (pay_…): a UUIDv7 the caller makes, as the design asks
    -- of every id it hands out.
    id                       uuid        PRIMARY KEY,
    user_id                  bigint      NOT NULL REFERENCES public.users (id),
    amount                   bigint      NOT NULL,
    currency                 text        NOT NULL,
    payment_method           text        NOT NULL,
    description              text,
    status                   text        NOT NULL DEFAULT 'pending',
    stripe_payment_intent_id text,
    created_at               timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS leastsql.idempotency_keys (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id          bigint      NOT NULL REFERENCES public.users (id),
    idempotency_key  text        NOT NULL,
    -- The request as it came, for telling a reuse with other parameters.
    request_params   jsonb       NOT NULL,
    recovery_point   text        NOT NULL,
    -- The lease: set while a run holds the key, and the fence of its
    -- writes (the finishing update names the lease it holds).
    locked_at        timestamptz,
    last_run_at      timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- Checked at commit: the key is reserved before its payment exists.
    payment_id       uuid        REFERENCES leastsql.payments (id) DEFERRABLE INITIALLY DEFERRED,
    -- The stored answer, once finished.
    response_code    int,
    response_headers jsonb,
    response_body    bytea,
    CONSTRAINT idempotency_keys_user_key UNIQUE (user_id, idempotency_key)
);

CREATE TABLE IF NOT EXISTS leastsql.audit_records (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       bigint      NOT NULL REFERENCES public.users (id),
    action        text        NOT NULL,
    resource_type text        NOT NULL,
    resource_id   uuid        NOT NULL,
    data          jsonb       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS leastsql.staged_jobs (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_name text   NOT NULL,
    job_args jsonb  NOT NULL
);
