package chaos

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// parse parses args against a root that has bin/paymentsd and
// bin/stripefake.
func parse(t *testing.T, args ...string) *Config {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"paymentsd", "stripefake"} {
		if err := os.WriteFile(filepath.Join(root, "bin", name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("CHAOS_DURATION", "")
	t.Setenv("CHAOS_FAILOVER", "")
	cfg, err := ParseFlags(append([]string{"-root", root}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A lost key comes back after a delay that scales with the run, past the
// old two-minute lookback in a 10-minute run, and search lags longer than
// any lost PaymentIntent can be old at its retry.
func TestLostHistoryTimingScalesWithTheRun(t *testing.T) {
	for _, tc := range []struct {
		duration    string
		retry, lag  time.Duration
		pastOldLook bool
	}{
		{"45s", 11250 * time.Millisecond, 52500 * time.Millisecond, false},
		{"10m", 150 * time.Second, 330 * time.Second, true},
		{"1h", 150 * time.Second, 330 * time.Second, true},
	} {
		cfg := parse(t, "-duration", tc.duration)
		lag := time.Duration(cfg.Faults.SearchLagMS) * time.Millisecond
		if cfg.LostEvery == 0 || cfg.LostRetryAfter != tc.retry || lag != tc.lag {
			t.Errorf("-duration %s: lost every %s, retry after %s, search lag %s; want retry %s, lag %s",
				tc.duration, cfg.LostEvery, cfg.LostRetryAfter, lag, tc.retry, tc.lag)
		}
		if got := cfg.LostRetryAfter > oldLookback; got != tc.pastOldLook {
			t.Errorf("-duration %s: retry past the old lookback %v, want %v", tc.duration, got, tc.pastOldLook)
		}
		if oldest := 2 * cfg.LostRetryAfter; lag <= oldest {
			t.Errorf("-duration %s: search lag %s shows a PaymentIntent %s old", tc.duration, lag, oldest)
		}
	}
}

func TestLostHistoryOffInAFailoverRunAndLagKeptWhenSet(t *testing.T) {
	if cfg := parse(t, "-failover", "async"); cfg.LostEvery != 0 {
		t.Errorf("a failover run loses history at %s", cfg.LostEvery)
	}
	if cfg := parse(t, "-failover", "async", "-lost-every", "5s"); cfg.LostEvery != 5*time.Second {
		t.Errorf("-lost-every 5s in a failover run: %s", cfg.LostEvery)
	}
	if cfg := parse(t, "-search-lag-ms", "1000"); cfg.Faults.SearchLagMS != 1000 {
		t.Errorf("-search-lag-ms 1000 became %d", cfg.Faults.SearchLagMS)
	}
	if cfg := parse(t, "-lost-every", "0"); cfg.Faults.SearchLagMS != DefaultFaults.SearchLagMS {
		t.Errorf("without lost history the search lag became %d", cfg.Faults.SearchLagMS)
	}
}
