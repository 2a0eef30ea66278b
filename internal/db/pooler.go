package db

import "github.com/jackc/pgx/v5"

// TransactionPooled reports whether cfg's query exec mode is one that keeps
// no prepared statement past its transaction (default_query_exec_mode exec,
// simple_protocol, describe_exec or cache_describe, rather than pgx's
// default cache_statement): what DATABASE_URL says when it points at
// PgBouncer in transaction pooling mode. Nothing that lives in a session
// (LISTEN, a session-level lock or setting) may then be relied on across
// transactions.
func TransactionPooled(cfg *pgx.ConnConfig) bool {
	return cfg.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement
}
