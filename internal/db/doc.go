// Package db is the database edge of paymentsd: the sqlc-generated queries
// in dbsqlc, the pool and transaction they run on (Pool, Tx, WithTx, which
// retries serialization failures), the migrations, and the translation of
// driver errors into this package's (ErrNotFound, ErrUnavailable) as they
// cross the edge. Nothing above it sees pgx.ErrNoRows or a SQLSTATE; what
// it needs of one (IsUniqueViolation, IsTransient) it asks here.
package db
