package chaos

import (
	"testing"
	"time"
)

func TestMeasurePatroni(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	l := NewLedger()
	answer := func(ms int, label string) {
		l.stamps = append(l.stamps, stampedAnswer{at(ms), label})
		if label == "201" {
			l.created = append(l.created, at(ms))
		}
	}
	answer(-100, "201")                   // before the event: not counted
	answer(100, "201")                    // the old leader still takes writes
	answer(500, "503 store-unavailable")  // the stretch begins
	answer(900, "net:refused")            //
	answer(1500, "503 store-unavailable") //
	answer(2000, "402 card-declined")     // the database answers: the stretch ends
	answer(2500, "503 store-unavailable") // a shorter stretch
	answer(3000, "201")                   // the new leader's first 201
	answer(4000, "500 internal-error")    // after recovery, before the next event
	answer(6000, "500 internal-error")    // after the next event
	a := &PatroniEvent{At: at(0), ElectedAt: at(2800)}
	b := &PatroniEvent{At: at(5000), ElectedAt: at(7000)}
	rec := &Recovery{Failover: Failover{Patroni: []*PatroniEvent{a, b}}}
	measurePatroni(rec, l)

	if !a.FirstCreated.Equal(at(3000)) {
		t.Errorf("FirstCreated = %v, want +3s", a.FirstCreated.Sub(t0))
	}
	if a.OldCreated != 1 || !a.LastOldCreated.Equal(at(100)) {
		t.Errorf("OldCreated = %d at %v, want 1 at +100ms", a.OldCreated, a.LastOldCreated.Sub(t0))
	}
	if a.Unavailable != 1500*time.Millisecond || a.UnavailableN != 3 {
		t.Errorf("Unavailable = %s over %d answers, want 1.5s over 3", a.Unavailable, a.UnavailableN)
	}
	if a.Internal != 1 || b.Internal != 1 {
		t.Errorf("Internal = %d, %d; want 1, 1", a.Internal, b.Internal)
	}
	if a.Answers["201"] != 2 || a.Answers["503 store-unavailable"] != 3 || a.Answers["500 internal-error"] != 0 {
		t.Errorf("Answers = %v", a.Answers)
	}
	if !b.FirstCreated.IsZero() {
		t.Errorf("b.FirstCreated = %v, want none", b.FirstCreated)
	}
}

func TestPatroniHealthy(t *testing.T) {
	p := &PatroniCluster{Nodes: []string{"n1", "n2", "n3"}, Sync: true}
	leader := PatroniMember{Name: "n1", Role: "leader", State: "running", Timeline: 2}
	syncStandby := PatroniMember{Name: "n2", Role: "sync_standby", State: "running", Timeline: 2, Lag: float64(0)}
	replica := PatroniMember{Name: "n3", Role: "replica", State: "running", Timeline: 2, Lag: float64(0)}
	for _, tc := range []struct {
		name string
		ms   []PatroniMember
		sync bool
		want bool
	}{
		{"whole", []PatroniMember{leader, syncStandby, replica}, true, true},
		{"a node missing", []PatroniMember{leader, syncStandby}, true, false},
		{"no leader", []PatroniMember{syncStandby, replica}, true, false},
		{"no sync standby", []PatroniMember{leader, replica, {Name: "n2", Role: "replica", State: "running", Timeline: 2, Lag: float64(0)}}, true, false},
		{"no sync standby, asynchronous", []PatroniMember{leader, replica, {Name: "n2", Role: "replica", State: "running", Timeline: 2, Lag: float64(0)}}, false, true},
		{"a replica on the old timeline", []PatroniMember{leader, syncStandby, {Name: "n3", Role: "replica", State: "running", Timeline: 1, Lag: float64(0)}}, true, false},
		{"a replica with unknown lag", []PatroniMember{leader, syncStandby, {Name: "n3", Role: "replica", State: "running", Timeline: 2}}, true, false},
		{"a replica starting", []PatroniMember{leader, syncStandby, {Name: "n3", Role: "replica", State: "starting", Timeline: 2, Lag: float64(0)}}, true, false},
	} {
		p.Sync = tc.sync
		if got, why := p.healthy(tc.ms); got != tc.want {
			t.Errorf("%s: healthy = %v (%s), want %v", tc.name, got, why, tc.want)
		}
	}
}

func TestCheckPatroniEvents(t *testing.T) {
	ok := &PatroniEvent{Kind: "kill"}
	failed := &PatroniEvent{Kind: "patronictl switchover", Err: "Switchover failed, details: 503"}
	answered500 := &PatroniEvent{Kind: "kill", Internal: 2}
	for _, tc := range []struct {
		name       string
		mode       FailoverMode
		events     []*PatroniEvent
		violations int
	}{
		{"all three", FailoverPatroniSync, []*PatroniEvent{ok, ok, ok}, 0},
		{"one failed", FailoverPatroniAsync, []*PatroniEvent{ok, ok, failed}, 1},
		{"500s after one", FailoverPatroniSync, []*PatroniEvent{ok, answered500, ok}, 1},
		{"two missing", FailoverPatroniSync, []*PatroniEvent{ok}, 2},
		{"not a Patroni run", FailoverAsync, nil, 0},
	} {
		c := &Check{}
		checkPatroniEvents(c, &Recovery{Mode: tc.mode, Failover: Failover{Patroni: tc.events}})
		if c.Violations != tc.violations {
			t.Errorf("%s: %d violations (%v), want %d", tc.name, c.Violations, c.Details, tc.violations)
		}
	}
}
