package db

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNotFound is returned in place of pgx.ErrNoRows, so callers above the
// database edge do not depend on the driver.
var ErrNotFound = errors.New("not found")

// ErrUnavailable marks an error that means the store could not be reached or
// could not answer (connection refused, reset, timed out, server shutting
// down). Callers fail closed on it: 503, and nothing is charged.
var ErrUnavailable = errors.New("store unavailable")

// InterpretError translates driver errors at the database edge: no rows
// becomes ErrNotFound, connection-level failures are wrapped with
// ErrUnavailable, and everything else passes through unchanged.
func InterpretError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return ErrNotFound
	case IsUnavailable(err):
		return errors.Join(ErrUnavailable, err)
	}
	return err
}

// IsUnavailable reports whether err means Postgres was unreachable or
// unable to serve, as opposed to having rejected a statement.
func IsUnavailable(err error) bool {
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P0x: admin shutdown, crash
		// shutdown, cannot connect now; 53300: too many connections;
		// 25006: a write on a read-only transaction, which is a standby
		// (a connection that landed on one in a failover, through a
		// router whose health check had not caught up) or a primary
		// being demoted: the store cannot take writes there, for now.
		switch {
		case len(pgErr.Code) == 5 && pgErr.Code[:2] == "08",
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03",
			pgErr.Code == "53300", pgErr.Code == "25006":
			return true
		}
		return false
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.Timeout(err) {
		return true
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	return pgconn.SafeToRetry(err) || errors.Is(err, context.DeadlineExceeded)
}

// IsTransient reports whether err may pass if the same work is tried again
// later: the store unreachable, a serialization failure or deadlock, a lock
// or statement timeout, a cancelled context. Anything else (a constraint,
// bad data) fails the same way every time.
func IsTransient(err error) bool {
	if IsUnavailable(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01", "55P03", "57014":
			return true
		}
	}
	return false
}

// IsUniqueViolation reports whether err is a unique violation of the named
// constraint. It matches the SQLSTATE and the constraint name, never the text.
func IsUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}
