package stripeonce

import (
	"context"
	"time"

	"github.com/rs/zerolog"
)

// foundNothing reports a lookup of span that found nothing of the intent
// made since madeSince (the key's creation; before the first send after a
// history loss, the oldest time a lost send of it may date from).
//
// Stripe's search lags writes by an amount it does not bound ("under a
// minute" normally; "could be delayed during an outage"): SearchLag is
// this service's assumption. A lookup relies on it wherever the
// consistent list does not reach: before span.Since, or everywhere when
// the list is empty (a reconcile long past the window). When that stretch
// includes time since madeSince (older keys, every lookup after a history
// loss, and every search-only lookup), the conclusion "nothing exists" is
// only as good as the assumption; it is counted and logged with what it
// assumed, so that an operator who learns of a longer search delay at
// Stripe can find the conclusions it may have made wrong (see
// docs/operations.md, "Search lag").
func (st *State) foundNothing(ctx context.Context, rules Rules, span Span, madeSince time.Time, result string) {
	rules.Observe(result)
	searchOnlyBefore := span.Since
	if span.Empty() {
		searchOnlyBefore = st.now() // no list: search covered everything
	}
	if !span.Empty() && !searchOnlyBefore.After(madeSince) {
		return // the list covered all the time since the intent could have made anything
	}
	rules.ObserveTrustedSearchLag(result)
	zerolog.Ctx(ctx).Info().Str("lookup", result).Str("search_lag", rules.SearchLag.String()).
		Time("search_only_before", searchOnlyBefore.UTC().Truncate(time.Second)).
		Time("key_created_at", st.KeyCreatedAt.UTC().Truncate(time.Second)).
		Msg("lookup found nothing; it trusted Stripe's search to lag by no more than search_lag")
}
