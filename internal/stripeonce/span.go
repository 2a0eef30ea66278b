package stripeonce

import "time"

// Span is where to look for what an intent made. Search covers every object
// created before Since; a list must cover Since to Until, both ends
// included, and nothing when Since is after Until.
type Span struct {
	Since, Until time.Time
	// SearchSince is the oldest creation time an object may have and still
	// be the intent's (the zero time: any).
	SearchSince time.Time
}

// Empty reports whether the list has nothing to cover.
func (s Span) Empty() bool { return s.Since.After(s.Until) }

// Lookup is where a lookup must look for what the intent made until until
// (a time of the database's clock): Stripe's search, which finds every
// object older than its lag, and a list by creation time, strongly
// consistent, over what search may not have indexed yet, from SearchLag
// and LookupLookback before now to until. Both ends are moved into
// Stripe's clock by the skew measured from its answers. No time the
// database recorded bounds it from below: a failover or a restore may have
// lost the record of a send, and a skewed clock may have misdated it.
func (st *State) Lookup(rules Rules, until time.Time) Span {
	lo, hi, now := st.skew(rules)
	return Span{
		Since: now.Add(lo - rules.SearchLag - rules.LookupLookback),
		Until: until.Add(hi + time.Second), // Date has whole seconds
		// What this key's sends made, or an earlier history's sends of
		// it that Stripe still replays (its window before the key was
		// stored); an object of the intent older than that belongs to an
		// earlier use of the key, reused once its tombstone expired.
		SearchSince: st.KeyCreatedAt.Add(lo - Window - rules.ExecutionBound - rules.LookupLookback),
	}
}

// skew is the database's clock's distance to Stripe's as a range: the
// measured skew (StripeOffset, from the Date of Stripe's answers) and none
// at all, since a Date a proxy rewrote would move a window off what it is
// meant to hold; a window moved by lo at its start and hi at its end holds
// what either would. now is the database's clock.
func (st *State) skew(rules Rules) (lo, hi time.Duration, now time.Time) {
	now = st.now()
	toLocal := time.Now().Sub(now) // ours less the database's
	measured := rules.StripeOffset()
	return toLocal + min(measured, 0), toLocal + max(measured, 0), now
}

// lostHistorySpan is the lookup of a key made within LostHistoryHorizon
// after the database lost history, before a send of its first Stripe key
// (every run's, until the key is spent: a run that stopped before its
// lookup answered leaves it to the next): everything the intent made from
// the horizon and Stripe's window before the loss on. ok is false when no
// such lookup is due.
//
// Search sees what is older than its lag; the list covers the rest, as
// State.Lookup's does. Stripe's replay of key 1 cannot stand in for it:
// the lost history may have spent key 1 and charged under a later key,
// with key 1 first used more than Stripe's window ago and the charge
// younger than search's lag; key 1 sent again is then a new create.
//
// The list need not reach past what a lost send may have made: every lost
// send went out before the loss was seen (the old primary is fenced before
// the new one serves, operations.md "Database failover"), so
// what it made is made, and listed, within ExecutionBound and the
// visibility margin after that. Once search covers that too (SearchLag and
// LookupLookback later), the list is empty and search alone decides, as
// the send cut-off lets reconcile's do: for the horizon's three days, new
// keys on a busy account would otherwise page through an hour of its
// PaymentIntents each, or be refused when the list is too long.
//
// The normal path's lookups (after a spent key) have no such hole: a run
// sends only before the send cut-off of a KeyCreatedAt the database kept,
// and every Stripe key of the intent, in any history, was first used after
// that time; so whatever key it sends next, Stripe still remembers it and
// replays what any history made under it. A key made after the loss came
// through this lookup first.
func (st *State) lostHistorySpan(rules Rules) (Span, bool) {
	// lost is no later than the loss (a key made on the new history, even
	// before the heartbeat saw the loss, is made after it); seen is when
	// the loss was seen, no earlier than it.
	lost, seen := rules.LostHistoryAt(), rules.LostHistorySeenAt()
	if seen.Before(lost) {
		seen = lost
	}
	if st.Attempt != 1 || st.SpentAt != nil || lost.IsZero() ||
		st.KeyCreatedAt.Before(lost) || st.KeyCreatedAt.After(seen.Add(rules.LostHistoryHorizon)) {
		return Span{}, false
	}
	lo, _, now := st.skew(rules)
	span := st.Lookup(rules, earliest(now, seen.Add(rules.ExecutionBound+rules.VisibilityMargin)))
	// A lost key was made after lost; a restore may go back as far as the
	// horizon before the loss was seen: a lost key's sends may be as old,
	// and Stripe's window older still.
	span.SearchSince = earliest(lost, seen.Add(-rules.LostHistoryHorizon)).
		Add(lo - Window - rules.ExecutionBound - rules.LookupLookback)
	return span, true
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
