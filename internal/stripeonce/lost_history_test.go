package stripeonce

import (
	"testing"
	"time"
)

// The lookup before a send after a history loss lists what search may not
// show yet of what a lost send made, and nothing once search shows it all.
func TestLostHistorySpan(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	rulesLostAt := func(lost time.Time) Rules {
		return Rules{LostHistoryAt: func() time.Time { return lost }}.WithDefaults()
	}
	fresh := func() *State { return &State{KeyCreatedAt: now, Attempt: 1, Now: clock} }
	// The test's own clock is the database's: skew from time.Now is
	// whatever the machine's is, so compare with a margin for it.
	skew := time.Since(now)

	t.Run("JustAfterTheLossTheListCoversWhatSearchMayNotShow", func(t *testing.T) {
		rules := rulesLostAt(now.Add(-time.Minute))
		span, ok := fresh().lostHistorySpan(rules)
		if !ok || span.Empty() {
			t.Fatalf("want a list, got %+v (due %v)", span, ok)
		}
		// A charge made under a later Stripe key 25 minutes ago, and
		// one made as the loss was seen, are listed.
		for _, created := range []time.Time{now.Add(-25 * time.Minute), now.Add(-time.Minute)} {
			created = created.Add(skew)
			if created.Before(span.Since) || created.After(span.Until) {
				t.Errorf("%s is not listed by %+v", created, span)
			}
		}
	})

	t.Run("OnceSearchShowsWhatLostSendsMadeThereIsNoList", func(t *testing.T) {
		rules := rulesLostAt(now.Add(-2 * time.Hour))
		span, ok := fresh().lostHistorySpan(rules)
		if !ok {
			t.Fatal("a key made after the loss is looked up")
		}
		if !span.Empty() {
			t.Errorf("everything a lost send made is searchable; want no list, got %+v", span)
		}
	})

	// A loss dated from the old identity's last confirmation: keys made
	// before the heartbeat saw it are looked up; the horizon, the list's
	// end, and search's reach run from when it was seen.
	t.Run("ALossSeenLateIsDatedFromBeforeIt", func(t *testing.T) {
		lost, seen := now.Add(-100*time.Hour), now.Add(-time.Minute)
		rules := Rules{
			LostHistoryAt:     func() time.Time { return lost },
			LostHistorySeenAt: func() time.Time { return seen },
		}.WithDefaults()
		st := fresh()
		st.KeyCreatedAt = now.Add(-2 * time.Minute) // made after the loss, before it was seen
		span, ok := st.lostHistorySpan(rules)
		if !ok || span.Empty() {
			t.Fatalf("want a lookup with a list, got %+v (due %v)", span, ok)
		}
		if want := lost.Add(skew - Window); !span.SearchSince.Before(want) {
			t.Errorf("search must reach the day before the loss (%s), got %s", want, span.SearchSince)
		}
		st.KeyCreatedAt = seen.Add(73 * time.Hour)
		if _, ok := st.lostHistorySpan(rules); ok {
			t.Error("a key made past the horizon after the loss was seen was looked up")
		}
	})

	t.Run("KeysMadeBeforeTheLossOrPastTheHorizonAreNotLookedUp", func(t *testing.T) {
		if _, ok := fresh().lostHistorySpan(rulesLostAt(now.Add(time.Second))); ok {
			t.Error("a key made before the loss was looked up")
		}
		if _, ok := fresh().lostHistorySpan(rulesLostAt(now.Add(-73 * time.Hour))); ok {
			t.Error("a key made past the horizon was looked up")
		}
	})
}
