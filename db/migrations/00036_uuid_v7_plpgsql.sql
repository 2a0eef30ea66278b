-- +goose Up
-- paymentsd_uuid_v7 (00021), the default of every public id, in PL/pgSQL:
-- the same expression, so the same UUIDv7s. As a SQL function it could not
-- be inlined (its body reads FROM), and Postgres parsed and planned that
-- body again for each statement that called it (fmgr_sql keeps its plan
-- only for the statement's run): each payment's insert did. A PL/pgSQL
-- function is compiled once per connection and its expression planned
-- once.
--
-- Measured before this change: fresh.sql at 32 clients on one cluster, the
-- two definitions interleaved five times: 1177 and 1278 payments/s (+8.5%,
-- this one ahead in four rounds), the machine busy 1713 and 1585 µs a
-- payment.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION paymentsd_uuid_v7(at timestamptz DEFAULT clock_timestamp()) RETURNS uuid
LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $$
DECLARE
    r bytea := uuid_send(gen_random_uuid());
BEGIN
    RETURN encode(set_byte(
        overlay(r PLACING substring(int8send((extract(epoch FROM at) * 1000)::bigint) FROM 3) FROM 1 FOR 6),
        6, (get_byte(r, 6) & 15) | 112), 'hex')::uuid;
END
$$;
-- +goose StatementEnd

-- +goose Down
CREATE OR REPLACE FUNCTION paymentsd_uuid_v7(at timestamptz DEFAULT clock_timestamp()) RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(set_byte(
        overlay(r PLACING substring(int8send((extract(epoch FROM at) * 1000)::bigint) FROM 3) FROM 1 FOR 6),
        6, (get_byte(r, 6) & 15) | 112), 'hex')::uuid
    FROM uuid_send(gen_random_uuid()) AS r
$$;
