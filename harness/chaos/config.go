package chaos

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// Config is one chaos run.
type Config struct {
	// Root is the repository root: bin/, scripts/ and .tmp/ live under it.
	Root string
	// Duration is how long clients send new intents under faults.
	Duration time.Duration
	// Clients is the number of concurrent clients.
	Clients int
	// Serve is the number of `paymentsd serve` processes.
	Serve int
	// Users is the number of API users the intents are spread over.
	Users int
	// Seed drives every random choice of the harness.
	Seed uint64
	// KillEvery is the mean pause between SIGKILLs (each pause is ±20%).
	KillEvery time.Duration
	// PGRestart restarts Postgres once, in the middle of the run.
	PGRestart bool
	// Drain bounds the wait, after the faults stopped, for every key to
	// finish and every receipt in the outbox to go out.
	Drain time.Duration
	// Think bounds a client's random pause between two intents.
	Think time.Duration
	// GiveUp is the share of intents whose client gives up early.
	GiveUp float64
	// Decline is the share of intents paid with a declining card.
	Decline float64
	// Refund is the share of succeeded payments that their client then
	// refunds: in full, in part, or by three concurrent refunds of 40%
	// each under their own keys (two succeed, one is refused).
	Refund float64
	// Manual is the share of payments only authorized (capture_method
	// manual), which their client then captures, in whole or in part,
	// cancels, captures and cancels at once, or leaves to expire
	// (manual.go).
	Manual float64
	// AuthorizationWindow is how long the emulator holds an authorization
	// before it cancels it, as Stripe does after 7 days.
	AuthorizationWindow time.Duration
	// Faults is the emulator's chaos while the run lasts.
	Faults stripefake.AdminChaos
	// PGData and PGPort name the harness's own Postgres cluster.
	PGData string
	PGPort int
	// Database is the database created afresh on that cluster.
	Database string
	// LogDir receives every process's log and the event log.
	LogDir string
	// Failover, when set, replaces the Postgres restart with a failover
	// (failover.go): FailoverSync or FailoverAsync.
	Failover FailoverMode
	// StandbyPGData and StandbyPGPort name the streaming standby of a
	// failover run.
	StandbyPGData string
	StandbyPGPort int
	// ReplicationCut is, in an asynchronous failover, how long before the
	// primary is stopped its standby stops receiving WAL: the standby lags
	// that far behind when it is promoted.
	ReplicationCut time.Duration
	// PromoteAfter is how long the cluster has no primary: from the
	// primary's stop to the standby's promotion.
	PromoteAfter time.Duration
	// Webhooks has the emulator send its webhook events to the serve
	// processes (webhooks.go).
	Webhooks bool
	// LostEvery is the mean pause between two lost-history faults
	// (lost_history.go; ±20%); 0 disables them. LostRetryAfter is how long
	// after the loss its client sends the key again.
	LostEvery, LostRetryAfter time.Duration
	// PgBouncer puts PgBouncer (transaction pooling) between every process
	// and the database, in front of HAProxy in a Patroni run.
	PgBouncer bool
}

// lostRetryAfter is the default delay of a lost key's retry: a quarter of
// the run, so that it comes while the run still loads the service, at
// least 10 s, and at most 2m30s, which is past the two minutes the charge
// lookup listed before a lost key's attempt before commit 70e3608.
func lostRetryAfter(run time.Duration) time.Duration {
	return min(max(run/4, 10*time.Second), 2*time.Minute+30*time.Second)
}

// lostSearchLag is the least search lag a run with lost history needs:
// a lost key is at most LostRetryAfter old when it is lost and comes back
// LostRetryAfter later, so search must not show a PaymentIntent that old,
// with half a minute to spare.
func lostSearchLag(retryAfter time.Duration) time.Duration {
	return 2*retryAfter + 30*time.Second
}

// Paymentsd is the path of the paymentsd binary under test.
func (c *Config) Paymentsd() string { return filepath.Join(c.Root, "bin", "paymentsd") }

// Stripefake is the path of the Stripe emulator's binary.
func (c *Config) Stripefake() string { return filepath.Join(c.Root, "bin", "stripefake") }

// PostgresScript is the path of scripts/postgres.sh.
func (c *Config) PostgresScript() string { return filepath.Join(c.Root, "scripts", "postgres.sh") }

// ParseFlags reads the command line. CHAOS_DURATION sets the default of
// -duration, CHAOS_FAILOVER that of -failover.
func ParseFlags(args []string, stderr io.Writer) (*Config, error) {
	root, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	defDuration := 45 * time.Second
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		if defDuration, err = time.ParseDuration(v); err != nil {
			return nil, fmt.Errorf("CHAOS_DURATION: %w", err)
		}
	}
	cfg := &Config{Faults: DefaultFaults}
	failover := os.Getenv("CHAOS_FAILOVER")
	fs := flag.NewFlagSet("paymentsd-chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Root, "root", root, "repository root (bin/paymentsd, bin/stripefake, scripts/postgres.sh, .tmp/)")
	fs.DurationVar(&cfg.Duration, "duration", defDuration, "how long to send new intents under faults; CHAOS_DURATION sets the default")
	fs.IntVar(&cfg.Clients, "clients", 16, "concurrent clients")
	fs.IntVar(&cfg.Serve, "serve", 2, "number of paymentsd serve processes")
	fs.IntVar(&cfg.Users, "users", 4, "number of API users")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of every random choice the harness makes")
	fs.DurationVar(&cfg.KillEvery, "kill-every", 10*time.Second, "mean pause between SIGKILLs of a serve process (±20%; 0 disables)")
	fs.BoolVar(&cfg.PGRestart, "pg-restart", true, "restart Postgres once in the middle of the run")
	// A process killed while it runs the completer holds the next run back
	// until River rescues its job: the job's timeout (the completer's run
	// bound, 18s at the run's 10s lease, plus a 30s grace) and up to River's
	// 30s rescuer interval, about 80s. The bound leaves room for that.
	fs.DurationVar(&cfg.Drain, "drain", 2*time.Minute, "bound on finishing every key after the faults stop")
	fs.DurationVar(&cfg.Think, "think", 200*time.Millisecond, "upper bound of a client's random pause between intents")
	fs.Float64Var(&cfg.GiveUp, "give-up", 0.15, "share of intents whose client gives up after 1-2 attempts")
	fs.Float64Var(&cfg.Decline, "decline", 0.10, "share of intents paid with pm_card_chargeDeclined")
	fs.Float64Var(&cfg.Refund, "refund", 0.30, "share of succeeded payments then refunded (full, partial, or three concurrent refunds)")
	fs.Float64Var(&cfg.Manual, "manual", 0.25, "share of payments only authorized, then captured, in part, canceled, raced or left to expire (off in a failover run unless set)")
	fs.DurationVar(&cfg.AuthorizationWindow, "authorization-window", 20*time.Second, "emulator: how long an authorization lasts before Stripe cancels it")
	fs.Float64Var(&cfg.Faults.P500, "p-500", cfg.Faults.P500, "emulator: probability of a 500 on a create")
	fs.Float64Var(&cfg.Faults.PLostAnswer, "p-lost-answer", cfg.Faults.PLostAnswer, "emulator: probability of a charge whose answer is lost")
	fs.Float64Var(&cfg.Faults.PHang, "p-hang", cfg.Faults.PHang, "emulator: probability of a hang")
	fs.Float64Var(&cfg.Faults.P500Charged, "p-500-charged", cfg.Faults.P500Charged, "emulator: probability of a 500 after the PaymentIntent was created and confirmed")
	fs.Float64Var(&cfg.Faults.PIdempotencyError, "p-idempotency-error", cfg.Faults.PIdempotencyError, "emulator: probability of a 400 idempotency_error that executes nothing")
	fs.Float64Var(&cfg.Faults.POutliveClient, "p-outlive-client", cfg.Faults.POutliveClient, "emulator: probability of a create slower than the client's timeout that still charges")
	fs.Int64Var(&cfg.Faults.OutliveLatencyMS, "outlive-latency-ms", cfg.Faults.OutliveLatencyMS, "emulator: latency of an outlive-client create (above paymentsd's 3 s Stripe timeout)")
	fs.Int64Var(&cfg.Faults.SearchLagMS, "search-lag-ms", cfg.Faults.SearchLagMS, "emulator: how long a new PaymentIntent stays invisible to search")
	fs.Int64Var(&cfg.Faults.MaxLatencyMS, "max-latency-ms", cfg.Faults.MaxLatencyMS, "emulator: upper bound of the random latency of a create")
	fs.Int64Var(&cfg.Faults.HangForMS, "hang-for-ms", cfg.Faults.HangForMS, "emulator: how long a hang lasts")
	fs.StringVar(&cfg.PGData, "pgdata", "", "data directory of the harness's Postgres cluster, the primary in a failover run (default <root>/.tmp/chaos-postgres, or chaos-failover-primary)")
	fs.IntVar(&cfg.PGPort, "pgport", 55433, "port of the harness's Postgres cluster")
	fs.StringVar(&cfg.Database, "database", "paymentsd_chaos", "database created afresh for the run")
	fs.StringVar(&cfg.LogDir, "logs", "", "directory of the process logs (default <root>/.tmp/chaos-logs, or chaos-failover-logs)")
	fs.StringVar(&failover, "failover", failover, "fail Postgres over to a streaming standby mid-run instead of restarting it: sync or async; or break a Patroni cluster three times: patroni-sync or patroni-async; CHAOS_FAILOVER sets the default")
	fs.StringVar(&cfg.StandbyPGData, "standby-pgdata", "", "data directory of the standby (default <root>/.tmp/chaos-failover-standby)")
	fs.IntVar(&cfg.StandbyPGPort, "standby-pgport", 0, "port of the standby (default -pgport + 1)")
	fs.DurationVar(&cfg.ReplicationCut, "replication-cut", 2*time.Second, "async failover: how long before the primary stops its standby stops receiving WAL (0: only the natural lag)")
	fs.DurationVar(&cfg.PromoteAfter, "promote-after", time.Second, "failover: how long the cluster has no primary before the standby is promoted")
	fs.BoolVar(&cfg.PgBouncer, "pgbouncer", os.Getenv("CHAOS_POOLER") == "pgbouncer",
		"the service connects through PgBouncer (transaction pooling), in front of HAProxy in a Patroni run; CHAOS_POOLER=pgbouncer sets the default")
	webhookFlags(fs, cfg)
	fs.DurationVar(&cfg.LostEvery, "lost-every", 10*time.Second, "mean pause between lost-history faults (±20%; 0 disables; off in a failover run unless set)")
	fs.DurationVar(&cfg.LostRetryAfter, "lost-retry-after", 0, "how long after its loss a lost key is sent again (default: a quarter of -duration, within 10s-2m30s)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if failover != "" && !set["lost-every"] {
		// A failover run loses history its own way (lost.go, resend.go).
		cfg.LostEvery = 0
	}
	if failover != "" && !set["manual"] {
		// What a failover loses is judged for payments and refunds only
		// (lost.go): a lost capture or cancel is not yet.
		cfg.Manual = 0
	}
	if cfg.LostRetryAfter == 0 {
		cfg.LostRetryAfter = lostRetryAfter(cfg.Duration)
	}
	if lag := lostSearchLag(cfg.LostRetryAfter).Milliseconds(); cfg.LostEvery > 0 && !set["search-lag-ms"] && cfg.Faults.SearchLagMS < lag {
		cfg.Faults.SearchLagMS = lag
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cfg.Failover = FailoverMode(failover)
	tmp, name := filepath.Join(cfg.Root, ".tmp"), "chaos"
	if cfg.Failover != FailoverOff {
		// A failover run has clusters and logs of its own, so it may run
		// beside an ordinary one; the failover is its Postgres fault.
		name, cfg.PGRestart = "chaos-failover", false
		if cfg.Failover.Patroni() {
			// -pgdata is scripts/patroni.sh's directory, -pgport its first port.
			name = "chaos-patroni"
		}
		if cfg.StandbyPGData == "" {
			cfg.StandbyPGData = filepath.Join(tmp, "chaos-failover-standby")
		}
		if cfg.StandbyPGPort == 0 {
			cfg.StandbyPGPort = cfg.PGPort + 1
		}
	}
	if cfg.PGData == "" && cfg.Failover.Patroni() {
		cfg.PGData = filepath.Join(tmp, "chaos-patroni")
	} else if cfg.PGData == "" && cfg.Failover != FailoverOff {
		cfg.PGData = filepath.Join(tmp, "chaos-failover-primary")
	} else if cfg.PGData == "" {
		cfg.PGData = filepath.Join(tmp, "chaos-postgres")
	}
	if cfg.LogDir == "" {
		cfg.LogDir = filepath.Join(tmp, name+"-logs")
	}
	return cfg, cfg.validate()
}

func (c *Config) validate() error {
	var errs []error
	if c.Duration <= 0 {
		errs = append(errs, errors.New("-duration must be positive"))
	}
	if c.Clients < 1 || c.Serve < 1 || c.Users < 1 {
		errs = append(errs, errors.New("-clients, -serve and -users must be at least 1"))
	}
	if c.LostEvery < 0 || c.LostRetryAfter < 0 {
		errs = append(errs, errors.New("-lost-every and -lost-retry-after must not be negative"))
	}
	if c.KillEvery < 0 || c.Drain <= 0 || c.Think < 0 {
		errs = append(errs, errors.New("-kill-every and -think must not be negative, -drain must be positive"))
	}
	for _, p := range []float64{c.GiveUp, c.Decline, c.Refund, c.Manual} {
		if p < 0 || p > 1 {
			errs = append(errs, errors.New("-give-up, -decline, -refund and -manual must be within [0, 1]"))
		}
	}
	if c.AuthorizationWindow <= 0 {
		errs = append(errs, errors.New("-authorization-window must be positive"))
	}
	switch c.Failover {
	case FailoverOff, FailoverSync, FailoverAsync, FailoverPatroniSync, FailoverPatroniAsync:
	default:
		errs = append(errs, fmt.Errorf("-failover %q: want sync, async, patroni-sync or patroni-async", c.Failover))
	}
	if c.Failover != FailoverOff && (c.StandbyPGPort == c.PGPort || c.ReplicationCut < 0 || c.PromoteAfter < 0) {
		errs = append(errs, errors.New("-standby-pgport must differ from -pgport; -replication-cut and -promote-after must not be negative"))
	}
	if c.PgBouncer && c.Failover != FailoverOff && !c.Failover.Patroni() {
		errs = append(errs, errors.New("-pgbouncer goes with no -failover, or patroni-sync or patroni-async"))
	}
	if _, err := c.Faults.Chaos(); err != nil {
		errs = append(errs, fmt.Errorf("emulator faults: %w", err))
	}
	if _, err := os.Stat(c.Paymentsd()); err != nil {
		errs = append(errs, fmt.Errorf("%s is missing: build it first (make build)", c.Paymentsd()))
	}
	if _, err := os.Stat(c.Stripefake()); err != nil {
		errs = append(errs, fmt.Errorf("%s is missing: build it first (make build)", c.Stripefake()))
	}
	return errors.Join(errs...)
}
