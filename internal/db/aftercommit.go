package db

import "context"

// afterCommit holds what to run once a transaction, or a savepoint within
// it, is kept.
type afterCommit struct{ fns []func() }

type afterCommitKey struct{}

// AfterCommit runs fn once the transaction that ctx is inside (WithTx's)
// commits, and never when that attempt rolls back or is retried: a metric
// counted with it counts what committed, once. Outside a transaction fn
// runs at once.
func AfterCommit(ctx context.Context, fn func()) {
	if ac, ok := ctx.Value(afterCommitKey{}).(*afterCommit); ok {
		ac.fns = append(ac.fns, fn)
		return
	}
	fn()
}

// SavepointScope gives a savepoint's work its own AfterCommit list: done
// with keep true (the savepoint was released) hands what it holds to the
// enclosing transaction; with keep false (rolled back) it is dropped.
func SavepointScope(ctx context.Context) (context.Context, func(keep bool)) {
	inner := &afterCommit{}
	return context.WithValue(ctx, afterCommitKey{}, inner), func(keep bool) {
		if !keep {
			return
		}
		for _, fn := range inner.fns {
			AfterCommit(ctx, fn)
		}
	}
}

// withAfterCommit gives one attempt of a transaction its AfterCommit list.
func withAfterCommit(ctx context.Context) (context.Context, func()) {
	ac := &afterCommit{}
	return context.WithValue(ctx, afterCommitKey{}, ac), func() {
		for _, fn := range ac.fns {
			fn()
		}
	}
}
