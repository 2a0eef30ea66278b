package chaos

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/paymentsd/paymentsd/internal/stripefake"
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
	// finish and every receipt job to run.
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
	// Faults is the emulator's chaos while the run lasts.
	Faults stripefake.AdminChaos
	// PGData and PGPort name the harness's own Postgres cluster.
	PGData string
	PGPort int
	// Database is the database created afresh on that cluster.
	Database string
	// LogDir receives every process's log and the event log.
	LogDir string
}

// Paymentsd is the path of the paymentsd binary under test.
func (c *Config) Paymentsd() string { return filepath.Join(c.Root, "bin", "paymentsd") }

// PostgresScript is the path of scripts/postgres.sh.
func (c *Config) PostgresScript() string { return filepath.Join(c.Root, "scripts", "postgres.sh") }

// ParseFlags reads the command line. CHAOS_DURATION sets the default of
// -duration.
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
	fs := flag.NewFlagSet("paymentsd-chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Root, "root", root, "repository root (bin/paymentsd, scripts/postgres.sh, .tmp/)")
	fs.DurationVar(&cfg.Duration, "duration", defDuration, "how long to send new intents under faults; CHAOS_DURATION sets the default")
	fs.IntVar(&cfg.Clients, "clients", 16, "concurrent clients")
	fs.IntVar(&cfg.Serve, "serve", 2, "number of paymentsd serve processes")
	fs.IntVar(&cfg.Users, "users", 4, "number of API users")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of every random choice the harness makes")
	fs.DurationVar(&cfg.KillEvery, "kill-every", 10*time.Second, "mean pause between SIGKILLs of a serve process (±20%; 0 disables)")
	fs.BoolVar(&cfg.PGRestart, "pg-restart", true, "restart Postgres once in the middle of the run")
	fs.DurationVar(&cfg.Drain, "drain", 60*time.Second, "bound on finishing every key after the faults stop")
	fs.DurationVar(&cfg.Think, "think", 200*time.Millisecond, "upper bound of a client's random pause between intents")
	fs.Float64Var(&cfg.GiveUp, "give-up", 0.15, "share of intents whose client gives up after 1-2 attempts")
	fs.Float64Var(&cfg.Decline, "decline", 0.10, "share of intents paid with pm_card_chargeDeclined")
	fs.Float64Var(&cfg.Refund, "refund", 0.30, "share of succeeded payments then refunded (full, partial, or three concurrent refunds)")
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
	fs.StringVar(&cfg.PGData, "pgdata", "", "data directory of the harness's Postgres cluster (default <root>/.tmp/chaos-postgres)")
	fs.IntVar(&cfg.PGPort, "pgport", 55433, "port of the harness's Postgres cluster")
	fs.StringVar(&cfg.Database, "database", "paymentsd_chaos", "database created afresh for the run")
	fs.StringVar(&cfg.LogDir, "logs", "", "directory of the process logs (default <root>/.tmp/chaos-logs)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if cfg.PGData == "" {
		cfg.PGData = filepath.Join(cfg.Root, ".tmp", "chaos-postgres")
	}
	if cfg.LogDir == "" {
		cfg.LogDir = filepath.Join(cfg.Root, ".tmp", "chaos-logs")
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
	if c.KillEvery < 0 || c.Drain <= 0 || c.Think < 0 {
		errs = append(errs, errors.New("-kill-every and -think must not be negative, -drain must be positive"))
	}
	for _, p := range []float64{c.GiveUp, c.Decline, c.Refund} {
		if p < 0 || p > 1 {
			errs = append(errs, errors.New("-give-up and -decline must be within [0, 1]"))
		}
	}
	if _, err := c.Faults.Chaos(); err != nil {
		errs = append(errs, fmt.Errorf("emulator faults: %w", err))
	}
	if _, err := os.Stat(c.Paymentsd()); err != nil {
		errs = append(errs, fmt.Errorf("%s is missing: build it first (go build -o bin/paymentsd ./cmd/paymentsd)", c.Paymentsd()))
	}
	return errors.Join(errs...)
}
