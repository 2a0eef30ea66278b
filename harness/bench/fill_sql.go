package bench

// The SQL of Fill. Placeholders {{NAME}} are replaced with numbers (and the
// user ids as an array literal) that Fill formats itself, never with text
// from outside; see fillParams.expand.
//
// Every row is a pure function of its position, so a chunk is one
// INSERT … SELECT over generate_series per table and any chunk can be
// recomputed on its own. The key positions n = 0 … keys-1 are laid out in
// blocks of 21: positions 0–19 of a block are payment keys, position 20 a
// refund key. Payment index i (0, 1, 2, …) is position 21*(i/20) + i%20.

// fillFunctions are session-local helpers (pg_temp), each a function of a
// position or an index. They are declared STABLE, which is what their
// bodies are (text concatenation is), so that the planner inlines them; and
// their arguments are plain columns of a subquery kept apart with OFFSET 0,
// since a function that uses an argument twice is inlined only when the
// argument is cheap. A call that is not inlined costs microseconds a row.
const fillFunctions = `
-- A cheap integer hash: attributes pick from it, so neighbours differ.
CREATE FUNCTION pg_temp.fill_h(x bigint) RETURNS bigint LANGUAGE sql STABLE
AS $$ SELECT (((x + 40503) * 2654435761) % 4294967296) >> 12 $$;

-- A client's key: a UUIDv4 as clients send them (its version and variant
-- set), the rest of it from hash h, the variant's two free bits from n.
-- Random keys sort at random among the keys of their user, so the unique
-- index on (user_id, idempotency_key) and the tombstones' primary key are
-- the ones a service of random client keys has, and a new key lands on a
-- random page of them.
CREATE FUNCTION pg_temp.fill_key(h text, n bigint) RETURNS text LANGUAGE sql STABLE
AS $$ SELECT overlay(overlay(h::uuid::text PLACING '4' FROM 15) PLACING substr('89ab', 1 + (n % 4)::int, 1) FROM 20) $$;

-- When the key at position n was created: positions spread evenly over the
-- span that ends at the anchor, oldest first (ids grow with time, as a
-- sequence hands them out).
CREATE FUNCTION pg_temp.fill_t0(n bigint) RETURNS timestamptz LANGUAGE sql STABLE
AS $$ SELECT to_timestamp({{ANCHOR}}::float8 - {{SPAN}}::float8 + {{SPAN}}::float8 * (n::float8 + 0.5) / {{KEYS}}::float8) $$;

-- When it finished: after Stripe's answer, 150 to 850 ms later.
CREATE FUNCTION pg_temp.fill_t1(n bigint) RETURNS timestamptz LANGUAGE sql STABLE
AS $$ SELECT to_timestamp({{ANCHOR}}::float8 - {{SPAN}}::float8 + {{SPAN}}::float8 * (n::float8 + 0.5) / {{KEYS}}::float8
                         + 0.15 + (pg_temp.fill_h(n) % 700)::float8 / 1000) $$;

-- A time as Go's encoding/json writes a time.Time in UTC (RFC 3339 with
-- the fraction's trailing zeros dropped), as the stored answers hold it.
CREATE FUNCTION pg_temp.fill_gotime(t timestamptz) RETURNS text LANGUAGE sql STABLE
AS $$ SELECT rtrim(rtrim(to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '0'), '.') || 'Z' $$;

-- The payment of index i: its user, amount, currency, card and description.
CREATE FUNCTION pg_temp.fill_user(i bigint) RETURNS bigint LANGUAGE sql STABLE
AS $$ SELECT ('{{USERS}}'::bigint[])[1 + i % {{NUSERS}}] $$;
CREATE FUNCTION pg_temp.fill_amount(i bigint) RETURNS bigint LANGUAGE sql STABLE
AS $$ SELECT 100 + pg_temp.fill_h(3 * i + 1) % 49901 $$;
CREATE FUNCTION pg_temp.fill_currency(i bigint) RETURNS text LANGUAGE sql STABLE
AS $$ SELECT (ARRAY['usd','usd','usd','usd','usd','usd','usd','eur','eur','gbp'])[1 + pg_temp.fill_h(3 * i + 2) % 10] $$;
-- Declined: 2 payments in 25 (8%).
CREATE FUNCTION pg_temp.fill_declined(i bigint) RETURNS boolean LANGUAGE sql STABLE
AS $$ SELECT i % 25 < 2 $$;
CREATE FUNCTION pg_temp.fill_pm(i bigint) RETURNS text LANGUAGE sql STABLE
AS $$ SELECT CASE WHEN i % 25 < 2
    THEN (ARRAY['pm_card_chargeDeclined','pm_card_chargeDeclined','pm_card_chargeDeclined','pm_card_chargeDeclined',
                'pm_card_chargeDeclined','pm_card_chargeDeclined','pm_card_chargeDeclinedInsufficientFunds',
                'pm_card_chargeDeclinedInsufficientFunds','pm_card_chargeDeclinedInsufficientFunds',
                'pm_card_chargeDeclinedLostCard'])[1 + pg_temp.fill_h(3 * i) % 10]
    ELSE (ARRAY['pm_card_visa','pm_card_visa','pm_card_visa','pm_card_visa','pm_card_visa','pm_card_visa',
                'pm_card_mastercard','pm_card_mastercard','pm_card_mastercard','pm_card_amex'])[1 + pg_temp.fill_h(3 * i) % 10]
    END $$;
CREATE FUNCTION pg_temp.fill_description(i bigint) RETURNS text LANGUAGE sql STABLE
AS $$ SELECT CASE WHEN pg_temp.fill_h(7 * i + 5) % 3 = 0 THEN NULL ELSE 'Order #' || (100000 + i) END $$;

-- The refund of index j (its key is at position 21*j + 20) refunds payment
-- fill_refunded(j): the 8th payment of the block an hour's worth of blocks
-- earlier ({{LAG}} blocks), or, in the first hour, the 9th of its own block.
-- Neither is ever declined (i % 25 is never 0 or 1 there).
CREATE FUNCTION pg_temp.fill_refunded(j bigint) RETURNS bigint LANGUAGE sql STABLE
AS $$ SELECT CASE WHEN j >= {{LAG}} THEN 20 * (j - {{LAG}}) + 7 ELSE 20 * j + 8 END $$;
-- The refund of payment i, if any: the inverse of fill_refunded.
CREATE FUNCTION pg_temp.fill_refund_of(i bigint) RETURNS bigint LANGUAGE sql STABLE
AS $$ SELECT CASE
    WHEN i % 20 = 7 AND 21 * (i / 20 + {{LAG}}) + 20 < {{KEYS}} THEN i / 20 + {{LAG}}
    WHEN i % 20 = 8 AND i / 20 < {{LAG}} AND 21 * (i / 20) + 20 < {{KEYS}} THEN i / 20
    END $$;
-- Half the refunds give back all that remains (no amount in the request),
-- the other half half of it (amounts are 100 or more); a third name a
-- reason. (Each argument used once, so that any argument inlines.)
CREATE FUNCTION pg_temp.fill_refund_amount(j bigint, amount bigint) RETURNS bigint LANGUAGE sql STABLE
AS $$ SELECT amount / (1 + j % 2) $$;
CREATE FUNCTION pg_temp.fill_reason(j bigint) RETURNS text LANGUAGE sql STABLE
AS $$ SELECT CASE WHEN j % 3 = 0 THEN 'requested_by_customer' END $$;

-- The canonical request (RFC 8785: members sorted, no white space), as
-- internal/idempotency fingerprints it. Every string here is plain ASCII
-- without quotes or backslashes, so it needs no escaping.
CREATE FUNCTION pg_temp.fill_payment_canon(amount bigint, currency text, pm text, description text) RETURNS text LANGUAGE sql STABLE
AS $$ SELECT '{"amount":' || amount || ',"currency":"' || currency || '"'
          || coalesce(',"description":"' || description || '"', '') || ',"payment_method":"' || pm || '"}' $$;
CREATE FUNCTION pg_temp.fill_refund_canon(j bigint, amount bigint, payment_ref text) RETURNS text LANGUAGE sql STABLE
AS $$ SELECT '{' || CASE WHEN j % 2 = 0 THEN '' ELSE '"amount":' || pg_temp.fill_refund_amount(j, amount) || ',' END
          || '"payment_id":"' || payment_ref || '"' || coalesce(',"reason":"' || pg_temp.fill_reason(j) || '"', '') || '}' $$;
CREATE FUNCTION pg_temp.fill_fingerprint(path_pattern text, canon text) RETURNS bytea LANGUAGE sql STABLE
AS $$ SELECT sha256(convert_to('POST' || chr(10) || path_pattern || chr(10) || canon, 'UTF8')) $$;

-- The digest of a request as a client sends it (idempotency.Digest): the
-- body is bench.ClientBody's, a payment's canonical request, or a refund's
-- without its payment_id (fill_refund_body), which is in the path.
CREATE FUNCTION pg_temp.fill_digest(path text, body text) RETURNS bytea LANGUAGE sql STABLE
AS $$ SELECT substr(sha256(convert_to('POST' || chr(10) || path || chr(10) || body, 'UTF8')), 1, 16) $$;
CREATE FUNCTION pg_temp.fill_refund_body(j bigint, amount bigint) RETURNS text LANGUAGE sql STABLE
AS $$ SELECT '{' || concat_ws(',', CASE WHEN j % 2 = 1 THEN '"amount":' || pg_temp.fill_refund_amount(j, amount) END,
                                   '"reason":"' || pg_temp.fill_reason(j) || '"') || '}' $$;

-- Public ids (package ids): a UUIDv7 of the row's creation time, its
-- random bits from seed (so a fill is the same every time), and the id as
-- the API shows it, prefix and 26 lowercase Crockford base32 digits.
CREATE FUNCTION pg_temp.fill_uuid(t timestamptz, seed text) RETURNS uuid LANGUAGE sql IMMUTABLE
AS $$ SELECT encode(set_byte(set_byte(
              overlay(r PLACING substring(int8send((extract(epoch FROM t) * 1000)::bigint) FROM 3) FROM 1 FOR 6),
              6, (get_byte(r, 6) & 15) | 112), 8, (get_byte(r, 8) & 63) | 128), 'hex')::uuid
      FROM decode(md5(seed), 'hex') AS r $$;
CREATE FUNCTION pg_temp.fill_public_id(prefix text, u uuid) RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT prefix || '_'
          || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 1 FOR 5)::int + 1, 1) || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 6 FOR 5)::int + 1, 1)
          || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 11 FOR 5)::int + 1, 1) || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 16 FOR 5)::int + 1, 1)
          || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 21 FOR 5)::int + 1, 1) || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 26 FOR 5)::int + 1, 1)
          || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 31 FOR 5)::int + 1, 1) || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 36 FOR 5)::int + 1, 1)
          || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 41 FOR 5)::int + 1, 1) || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 46 FOR 5)::int + 1, 1)
          || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 51 FOR 5)::int + 1, 1) || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 56 FOR 5)::int + 1, 1)
          || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 61 FOR 5)::int + 1, 1) || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 66 FOR 5)::int + 1, 1)
          || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 71 FOR 5)::int + 1, 1) || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 76 FOR 5)::int + 1, 1)
          || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 81 FOR 5)::int + 1, 1) || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 86 FOR 5)::int + 1, 1)
          || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 91 FOR 5)::int + 1, 1) || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 96 FOR 5)::int + 1, 1)
          || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 101 FOR 5)::int + 1, 1) || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 106 FOR 5)::int + 1, 1)
          || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 111 FOR 5)::int + 1, 1) || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 116 FOR 5)::int + 1, 1)
          || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 121 FOR 5)::int + 1, 1) || substr('0123456789abcdefghjkmnpqrstvwxyz', substring(b FROM 126 FOR 5)::int + 1, 1)
      FROM (SELECT ('x' || encode(uuid_send(u), 'hex'))::bit(128) || B'00' AS b) AS s $$;

-- What one chunk of keys needs, computed once per position.
CREATE TEMP TABLE fill_src (
    n bigint, key_id bigint, is_refund boolean, user_id bigint, key text,
    created_at timestamptz, finished_at timestamptz,
    payment_id bigint, amount bigint, currency text, pm text, description text, declined boolean, pi_id text,
    refund_id bigint, refund_index bigint, refund_amount bigint, reason text, re_id text,
    refunded bigint, payment_updated_at timestamptz, intent_id text, canon text, has_receipt boolean,
    payment_uuid uuid, payment_ref text, refund_uuid uuid, refund_ref text
) ON COMMIT DELETE ROWS;
`

// fillChunk fills the key positions {{LO}} … {{HI}}-1: the source rows,
// then each table from them, in one transaction.
var fillChunk = []struct{ table, sql string }{
	{"source", `
INSERT INTO fill_src
SELECT n, key_id, is_refund, user_id, key, created_at, finished_at,
       payment_id, amount, currency, pm, description, declined, pi_id,
       refund_id, refund_index, refund_amount, reason, re_id,
       refunded, payment_updated_at,
       substr(encode(sha256(convert_to('{{NAMESPACE}}', 'UTF8') || '\x00'::bytea || convert_to(user_id::text, 'UTF8')
              || '\x00'::bytea || convert_to(key, 'UTF8')), 'hex'), 1, 32),
       CASE WHEN is_refund THEN pg_temp.fill_refund_canon(refund_index, amount, pg_temp.fill_public_id('pay', payment_uuid))
            ELSE pg_temp.fill_payment_canon(amount, currency, pm, description) END,
       NOT is_refund AND NOT declined,
       payment_uuid, pg_temp.fill_public_id('pay', payment_uuid),
       refund_uuid, CASE WHEN is_refund THEN pg_temp.fill_public_id('re', refund_uuid) END
FROM (
    SELECT n, i, {{KEY_BASE}} + n AS key_id, is_refund, pg_temp.fill_user(i) AS user_id,
           pg_temp.fill_key(md5('k' || ({{KEY_BASE}} + n)), n) AS key,
           pg_temp.fill_t0(n) AS created_at, pg_temp.fill_t1(n) AS finished_at,
           {{PAYMENT_BASE}} + i AS payment_id, pg_temp.fill_amount(i) AS amount, pg_temp.fill_currency(i) AS currency,
           pg_temp.fill_pm(i) AS pm, pg_temp.fill_description(i) AS description, pg_temp.fill_declined(i) AS declined,
           'pi_' || substr(md5('pi' || ({{PAYMENT_BASE}} + i)), 1, 24) AS pi_id,
           {{REFUND_BASE}} + j AS refund_id, j AS refund_index,
           pg_temp.fill_refund_amount(j, pg_temp.fill_amount(i)) AS refund_amount, pg_temp.fill_reason(j) AS reason,
           're_' || substr(md5('re' || ({{REFUND_BASE}} + j)), 1, 24) AS re_id,
           coalesce(pg_temp.fill_refund_amount(r, pg_temp.fill_amount(i)), 0) AS refunded,
           coalesce(pg_temp.fill_t1(21 * r + 20), pg_temp.fill_t1(n)) AS payment_updated_at,
           -- A payment's key is at position 21 (i / 20) + i % 20.
           pg_temp.fill_uuid(pg_temp.fill_t0(21 * (i / 20) + i % 20), 'p' || ({{PAYMENT_BASE}} + i)) AS payment_uuid,
           CASE WHEN is_refund THEN pg_temp.fill_uuid(pg_temp.fill_t0(n), 'r' || ({{REFUND_BASE}} + j)) END AS refund_uuid
    FROM (
        SELECT n, n % 21 = 20 AS is_refund,
               CASE WHEN n % 21 = 20 THEN pg_temp.fill_refunded(n / 21) ELSE 20 * (n / 21) + n % 21 END AS i,
               CASE WHEN n % 21 = 20 THEN n / 21 END AS j,
               CASE WHEN n % 21 <> 20 THEN pg_temp.fill_refund_of(20 * (n / 21) + n % 21) END AS r
        FROM generate_series({{LO}}::bigint, {{HI}}::bigint - 1) AS n
        OFFSET 0 -- columns, not expressions, for the functions above
    ) AS p
    OFFSET 0 -- evaluate each column once, not once per use above
) AS s`},

	{"idempotency_keys", `
INSERT INTO idempotency_keys (
    id, user_id, idempotency_key, created_at, last_run_at, request_method, request_path,
    request_params, request_fingerprint, request_digest, recovery_point, lock_token, locked_at, locked_by, runs,
    response_code, response_headers, response_body, finished_at, needs_attention_at, last_error, flow)
SELECT key_id, user_id, key, created_at, finished_at, 'POST',
       CASE WHEN is_refund THEN '/payments/' || payment_ref || '/refunds' ELSE '/payments' END,
       canon::jsonb,
       pg_temp.fill_fingerprint(CASE WHEN is_refund THEN '/payments/{id}/refunds' ELSE '/payments' END, canon),
       CASE WHEN is_refund THEN pg_temp.fill_digest('/payments/' || payment_ref || '/refunds', pg_temp.fill_refund_body(refund_index, amount))
            ELSE pg_temp.fill_digest('/payments', canon) END,
       'finished', NULL, NULL, NULL, 1,
       CASE WHEN is_refund OR NOT declined THEN 201 ELSE 402 END,
       CASE WHEN is_refund THEN jsonb_build_object('Content-Type', 'application/json', 'Location', '/refunds/' || refund_ref)
            WHEN NOT declined THEN jsonb_build_object('Content-Type', 'application/json', 'Location', '/payments/' || payment_ref)
            ELSE jsonb_build_object('Content-Type', 'application/problem+json') END,
       convert_to(CASE
           WHEN is_refund THEN
               '{"id":"' || refund_ref || '","payment_id":"' || payment_ref || '","amount":' || refund_amount
               || ',"currency":"' || currency || '","status":"succeeded","reason":' || coalesce('"' || reason || '"', 'null')
               || ',"stripe_refund_id":"' || re_id || '","created_at":"' || pg_temp.fill_gotime(created_at) || '"}'
           WHEN NOT declined THEN
               '{"id":"' || payment_ref || '","amount":' || amount || ',"currency":"' || currency
               || '","status":"succeeded","stripe_payment_intent_id":"' || pi_id
               || '","description":' || coalesce('"' || description || '"', 'null')
               || ',"amount_refunded":0,"capture_method":"automatic","amount_captured":' || amount
               || ',"disputed":false,"created_at":"' || pg_temp.fill_gotime(created_at) || '"}'
           ELSE
               '{"type":"https://paymentsd.dev/problems/card-declined","title":"Card declined","status":402,"detail":"'
               || CASE WHEN pm = 'pm_card_chargeDeclinedInsufficientFunds' THEN 'Your card has insufficient funds.'
                       ELSE 'Your card was declined.' END
               || '","payment_id":"' || payment_ref || '","decline_code":"'
               || CASE pm WHEN 'pm_card_chargeDeclinedInsufficientFunds' THEN 'insufficient_funds'
                          WHEN 'pm_card_chargeDeclinedLostCard' THEN 'lost_card' ELSE 'generic_decline' END || '"}'
           END || chr(10), 'UTF8'),
       finished_at, NULL, NULL,
       CASE WHEN is_refund THEN 'refund' ELSE 'payment' END
FROM fill_src`},

	{"payments", `
INSERT INTO payments (
    id, user_id, idempotency_key_id, amount, currency, payment_method, description, status,
    stripe_payment_intent_id, failure_code, failure_message, created_at, updated_at,
    charge_attempt, charge_attempt_spent_at, amount_refunded, amount_reserved, charge_attempt_at,
    intent_id, disputed_at, public_id, amount_captured)
SELECT payment_id, user_id, key_id, amount, currency, pm, description,
       CASE WHEN declined THEN 'failed' ELSE 'succeeded' END, pi_id,
       CASE WHEN NOT declined THEN NULL
            WHEN pm = 'pm_card_chargeDeclinedInsufficientFunds' THEN 'insufficient_funds'
            WHEN pm = 'pm_card_chargeDeclinedLostCard' THEN 'lost_card' ELSE 'generic_decline' END,
       CASE WHEN NOT declined THEN NULL
            WHEN pm = 'pm_card_chargeDeclinedInsufficientFunds' THEN 'Your card has insufficient funds.'
            ELSE 'Your card was declined.' END,
       created_at, payment_updated_at, 1, NULL, refunded, refunded, created_at, intent_id, NULL, payment_uuid,
       CASE WHEN declined THEN 0 ELSE amount END
FROM fill_src
WHERE NOT is_refund`},

	{"refunds", `
INSERT INTO refunds (
    id, user_id, payment_id, idempotency_key_id, amount, currency, reason, status, stripe_refund_id,
    failure_reason, refund_attempt, refund_attempt_spent_at, refund_attempt_at, created_at, updated_at,
    intent_id, status_at, public_id, payment_public_id)
SELECT refund_id, user_id, payment_id, key_id, refund_amount, currency, reason, 'succeeded', re_id,
       NULL, 1, NULL, created_at, created_at, finished_at, intent_id, NULL, refund_uuid, payment_uuid
FROM fill_src
WHERE is_refund`},

	{"audit_records", `
INSERT INTO audit_records (id, user_id, action, resource_type, resource_id, data, created_at)
SELECT {{AUDIT_BASE}} + 2 * n + o, user_id,
       CASE WHEN is_refund THEN CASE o WHEN 0 THEN 'refund.created' ELSE 'refund.succeeded' END
            ELSE CASE o WHEN 0 THEN 'payment.created' WHEN 1 THEN CASE WHEN declined THEN 'payment.failed' ELSE 'payment.succeeded' END END
       END,
       CASE WHEN is_refund THEN 'refund' ELSE 'payment' END,
       CASE WHEN is_refund THEN refund_id ELSE payment_id END,
       CASE WHEN is_refund THEN CASE o
                WHEN 0 THEN jsonb_build_object('payment_id', payment_id, 'amount', refund_amount, 'idempotency_key_id', key_id)
                ELSE jsonb_build_object('payment_id', payment_id, 'amount', refund_amount, 'stripe_refund_id', re_id) END
            ELSE CASE o
                WHEN 0 THEN jsonb_build_object('status', 'pending', 'idempotency_key_id', key_id)
                ELSE jsonb_strip_nulls(jsonb_build_object(
                    'status', CASE WHEN declined THEN 'failed' ELSE 'succeeded' END,
                    'stripe_payment_intent_id', pi_id,
                    'failure_code', CASE WHEN NOT declined THEN NULL
                                         WHEN pm = 'pm_card_chargeDeclinedInsufficientFunds' THEN 'insufficient_funds'
                                         WHEN pm = 'pm_card_chargeDeclinedLostCard' THEN 'lost_card' ELSE 'generic_decline' END,
                    'idempotency_key_id', key_id)) END
       END,
       CASE o WHEN 0 THEN created_at ELSE finished_at END
FROM fill_src, (VALUES (0), (1)) AS outcome (o)`},

	{"receipts", `
INSERT INTO receipts (payment_id, user_id, amount, currency, delivered_at)
SELECT payment_id, user_id, amount, currency,
       finished_at + make_interval(secs => (20 + pg_temp.fill_h(n + 11) % 200)::float8 / 1000)
FROM fill_src
WHERE has_receipt`},

	{"stripe_events", `
INSERT INTO stripe_events (id, type, object_id, stripe_created, received_at, outcome, reason)
SELECT 'evt_' || substr(md5('evt' || key_id), 1, 24),
       CASE WHEN is_refund THEN 'refund.created'
            WHEN declined THEN 'payment_intent.payment_failed' ELSE 'payment_intent.succeeded' END,
       CASE WHEN is_refund THEN re_id ELSE pi_id END,
       date_trunc('second', finished_at),
       finished_at + make_interval(secs => (100 + pg_temp.fill_h(n + 13) % 400)::float8 / 1000),
       CASE WHEN is_refund THEN 'applied' ELSE 'ignored' END,
       CASE WHEN is_refund THEN NULL
            ELSE 'payment ' || payment_id || ' is ' || CASE WHEN declined THEN 'failed' ELSE 'succeeded' END || ' already' END
FROM fill_src`},
}

// fillTombstones fills tombstones {{LO}} … {{HI}}-1 of earlier keys, laid
// out like the keys (blocks of 21, the last a refund), with their own
// reserved key, payment and refund ids, and fingerprints of requests like
// the keys'. The tombstones' reaped_at are spread evenly, as densely as the
// keys' times, over a window that starts a backlog's share before the
// tombstone retention's edge; each one's key finished a key retention (and
// up to a reaper interval) before it was reaped.
const fillTombstones = `
INSERT INTO idempotency_key_tombstones (
    user_id, idempotency_key, request_method, request_path, request_fingerprint,
    response_code, resource_type, resource_id, resource_public_id, resource_prefix, finished_at, reaped_at)
SELECT pg_temp.fill_user(i), pg_temp.fill_key(md5('k' || ({{TOMB_KEY_BASE}} + m)), m), 'POST',
       CASE WHEN is_refund THEN '/payments/' || payment_ref || '/refunds' ELSE '/payments' END,
       CASE WHEN is_refund
            THEN pg_temp.fill_fingerprint('/payments/{id}/refunds', pg_temp.fill_refund_canon(m / 21, pg_temp.fill_amount(i), payment_ref))
            ELSE pg_temp.fill_fingerprint('/payments', pg_temp.fill_payment_canon(pg_temp.fill_amount(i), pg_temp.fill_currency(i), pg_temp.fill_pm(i), pg_temp.fill_description(i)))
       END,
       CASE WHEN NOT is_refund AND pg_temp.fill_declined(i) THEN 402 ELSE 201 END,
       CASE WHEN is_refund THEN 'refund' ELSE 'payment' END,
       CASE WHEN is_refund THEN {{TOMB_REFUND_BASE}} + m / 21 ELSE {{TOMB_PAYMENT_BASE}} + i END,
       CASE WHEN is_refund THEN pg_temp.fill_uuid(finished_at, 'tr' || ({{TOMB_REFUND_BASE}} + m / 21)) ELSE payment_uuid END,
       CASE WHEN is_refund THEN 're' ELSE 'pay' END,
       finished_at, reaped_at
FROM (
    SELECT m, is_refund, i, reaped_at, finished_at, payment_uuid, pg_temp.fill_public_id('pay', payment_uuid) AS payment_ref
    FROM (
        SELECT m, is_refund, i, reaped_at, finished_at,
               pg_temp.fill_uuid(finished_at, 'tp' || ({{TOMB_PAYMENT_BASE}} + i)) AS payment_uuid
        FROM (
            SELECT m, is_refund, i, reaped_at,
                   reaped_at - make_interval(secs => {{RETENTION}}::float8 + (pg_temp.fill_h(m + 17) % 60)::float8) AS finished_at
            FROM (
                SELECT m, m % 21 = 20 AS is_refund,
                       CASE WHEN m % 21 = 20 THEN 20 * (m / 21) + 7 ELSE 20 * (m / 21) + m % 21 END AS i,
                       to_timestamp({{ANCHOR}}::float8 - {{TOMB_RETENTION}}::float8 - {{TOMB_BACKLOG_SPAN}}::float8
                                    + {{TOMB_SPAN}}::float8 * (m::float8 + 0.5) / {{TOMBSTONES}}::float8) AS reaped_at
                FROM generate_series({{LO}}::bigint, {{HI}}::bigint - 1) AS m
            ) AS r
        ) AS f
        OFFSET 0 -- compute each uuid once
    ) AS u
) AS t`
