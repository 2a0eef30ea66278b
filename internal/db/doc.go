// Package db holds the database edge of paymentsd: the sqlc-generated queries
// in dbsqlc, the transaction helper that retries serialization failures, and
// the translation of driver errors into the sentinels the rest of the service
// understands.
package db
