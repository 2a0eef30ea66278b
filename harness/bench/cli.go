package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const usage = `usage:
  paymentsd-bench setup -admin-url URL -db NAME   drop and create database NAME; print its URL
  paymentsd-bench drop -admin-url URL -db NAME    drop database NAME if it exists
  paymentsd-bench free-port                       print a free TCP port on 127.0.0.1
  paymentsd-bench wait -url URL [-timeout 30s]    wait until URL answers 200
  paymentsd-bench run [flags]                     measure; write the JSON results and the report
  paymentsd-bench fill -json F -db-url URL -users F -keys N
                                                  fill the database (the services stopped) and
                                                  record the fill in the saved results
  paymentsd-bench run-filled -json F [flags]      measure the filled point (the services started
                                                  again); add it to the results and the report
  paymentsd-bench report -json F -md F -svg F     render the report again from saved results
  paymentsd-bench sql-profile [-hz 499] -a SIDE -b SIDE SIDE=FILE:PAYMENTS ...
                                                  fold perf script output of profiled pgbench
                                                  runs into the server's CPU a payment by phase
`

var errUsage = errors.New("usage")

// Main runs the command in args (without the program name) and returns the
// process exit code: 0, 1 when the harness failed, 2 for a bad command line.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprint(stderr, usage)
		return 2
	}
	fmt.Fprintln(stderr, "paymentsd-bench:", err)
	return 1
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	switch args[0] {
	case "setup":
		admin, db := fs.String("admin-url", "", "a database URL on the server"), fs.String("db", "paymentsd_bench", "database to create")
		if fs.Parse(args[1:]) != nil || *admin == "" {
			return errUsage
		}
		url, err := CreateDatabase(ctx, *admin, *db)
		if err == nil {
			fmt.Fprintln(stdout, url)
		}
		return err
	case "drop":
		admin, db := fs.String("admin-url", "", "a database URL on the server"), fs.String("db", "", "database to drop")
		if fs.Parse(args[1:]) != nil || *admin == "" || *db == "" {
			return errUsage
		}
		return DropDatabase(ctx, *admin, *db)
	case "fill":
		return fillCmd(ctx, fs, args[1:], stderr)
	case "run-filled":
		return runFilledCmd(ctx, fs, args[1:], stdout, stderr)
	case "free-port":
		port, err := FreePort()
		if err == nil {
			fmt.Fprintln(stdout, port)
		}
		return err
	case "wait":
		url, timeout := fs.String("url", "", "URL to poll"), fs.Duration("timeout", 30*time.Second, "how long to wait")
		if fs.Parse(args[1:]) != nil || *url == "" {
			return errUsage
		}
		return WaitReady(ctx, *url, *timeout)
	case "run":
		return runCmd(ctx, fs, args[1:], stdout, stderr)
	case "sql-profile":
		return sqlProfileCmd(fs, args[1:], stdout)
	case "report":
		jsonPath, md, svg := fs.String("json", "", "saved results"), fs.String("md", "BENCHMARKS.md", "report"), fs.String("svg", "docs/bench.svg", "plot")
		if fs.Parse(args[1:]) != nil || *jsonPath == "" {
			return errUsage
		}
		res, err := LoadResults(*jsonPath)
		if err != nil {
			return err
		}
		return writeReport(res, *md, *svg)
	}
	return errUsage
}

func runCmd(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var (
		cfg      = Config{Log: stderr, PGBench: &PGBench{}}
		users    = fs.String("users", "", "file of `paymentsd users create` lines")
		conns    = fs.String("conns", "1,8,32,64", "connection counts")
		duration = fs.Duration("duration", 10*time.Second, "measured window of every run")
		jsonPath = fs.String("json", "", "where to save the results")
		md       = fs.String("md", "BENCHMARKS.md", "report to write")
		svg      = fs.String("svg", "docs/bench.svg", "plot to write")
	)
	var profiler Profiler
	bareProfiler := Profiler{Process: "bare", Kinds: []string{"cpu", "allocs"}}
	fs.StringVar(&cfg.ServiceURL, "service", "", "base URL of paymentsd serve")
	fs.StringVar(&cfg.BareURL, "bare", "", "base URL of the bare service (paymentsd-bare)")
	fs.StringVar(&cfg.LeastURL, "least", "", "base URL of the bare service over the least SQL (paymentsd-bare -sql least); empty: not measured")
	fs.IntVar(&cfg.SlowConns, "slow-conns", SlowConns, "payments in flight at the slow-processor point (0: skip it)")
	fs.DurationVar(&cfg.SlowLatency, "slow-latency", SlowLatency, "the emulator's latency at the slow-processor point")
	fs.IntVar(&cfg.ManyConns, "many-conns", ManyConns, "payments in flight at the many-in-flight point, at the slow point's latency (0: skip it)")
	fs.StringVar(&profiler.URL, "pprof", "", "base URL of the service's pprof server: profile its runs at 32 connections")
	fs.StringVar(&bareProfiler.URL, "bare-pprof", "", "base URL of the bare service's pprof server: profile its runs at 32 connections too (CPU and allocations)")
	fs.StringVar(&profiler.Dir, "profile-dir", ".tmp/bench/profiles", "where to save the profiles")
	fs.StringVar(&profiler.Go, "go", "go", "the go command, for go tool pprof")
	fs.StringVar(&cfg.EmulatorURL, "emulator", "", "base URL of the Stripe emulator")
	fs.StringVar(&cfg.AdminURL, "admin-url", "", "URL of another database on the server, for the counters")
	fs.StringVar(&cfg.BenchURL, "db-url", "", "URL of the bench database")
	fs.StringVar(&cfg.BenchDB, "db", "paymentsd_bench", "name of the bench database")
	fs.IntVar(&cfg.ReplayKeys, "replay-keys", 32, "finished keys per user for the replays")
	fs.StringVar(&cfg.PGBench.Path, "pgbench", "pgbench", "pgbench binary")
	fs.StringVar(&cfg.Scripts, "scripts", "harness/bench/pgbench", "directory of fresh.sql and replay.sql")
	fs.StringVar(&cfg.Command, "command", "make bench", "the command to show in the report")
	fs.StringVar(&cfg.Code, "code", "", "the commit measured, to show in the report")
	processesFlag(fs, &cfg.Processes)
	if fs.Parse(args) != nil || fs.NArg() > 0 || cfg.ServiceURL == "" || cfg.BareURL == "" || cfg.EmulatorURL == "" ||
		cfg.AdminURL == "" || cfg.BenchURL == "" || *users == "" || *duration <= 0 || cfg.SlowConns < 0 || cfg.SlowLatency <= 0 || cfg.ManyConns < 0 {
		return errUsage
	}
	if profiler.URL != "" {
		cfg.Profiler = &profiler
	}
	if bareProfiler.URL != "" {
		bareProfiler.Dir, bareProfiler.Go = profiler.Dir, profiler.Go
		cfg.BareProfiler = &bareProfiler
	}
	var err error
	if cfg.Conns, err = parseConns(*conns); err != nil {
		return err
	}
	if cfg.Users, err = ReadUsers(*users); err != nil {
		return err
	}
	if cfg.Scripts, err = filepath.Abs(cfg.Scripts); err != nil {
		return err
	}
	cfg.Duration = *duration
	cfg.Warmup = min(max(*duration/10, 500*time.Millisecond), 2*time.Second)
	logDir, err := os.MkdirTemp("", "paymentsd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(logDir)
	cfg.PGBench = newPGBench(cfg.PGBench.Path, cfg.BenchURL, *duration, logDir, cfg.Users, cfg.ReplayKeys)

	res, err := Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *jsonPath != "" {
		if err := res.Save(*jsonPath); err != nil {
			return err
		}
	}
	if err := writeReport(res, *md, *svg); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%s\nWrote %s and %s.\n", Tables(res), *md, *svg)
	return nil
}

// newPGBench is pgbench at path against dbURL, with the scripts' variables:
// the users' id range and the replay keys per user.
func newPGBench(path, dbURL string, duration time.Duration, logDir string, users []User, replayKeys int) *PGBench {
	return &PGBench{
		Path: path, URL: dbURL, Duration: duration, LogDir: logDir,
		Vars: map[string]string{
			"umin":  strconv.FormatInt(users[0].ID, 10),
			"umax":  strconv.FormatInt(users[len(users)-1].ID, 10),
			"nkeys": strconv.Itoa(replayKeys),
		},
	}
}

// fillCmd fills the bench database and records the fill in the saved
// results (see filled.go).
func fillCmd(ctx context.Context, fs *flag.FlagSet, args []string, stderr io.Writer) error {
	var (
		jsonPath  = fs.String("json", "", "the saved results of the run on the empty database, to record the fill in")
		dbURL     = fs.String("db-url", "", "URL of the bench database")
		users     = fs.String("users", "", "file of `paymentsd users create` lines")
		keys      = fs.Int("keys", FillKeys, "finished keys to fill")
		retention = fs.Duration("key-retention", 24*time.Hour, "the service's PAYMENTSD_KEY_RETENTION")
	)
	if fs.Parse(args) != nil || fs.NArg() > 0 || *jsonPath == "" || *dbURL == "" || *users == "" || *keys < 1 {
		return errUsage
	}
	res, err := LoadResults(*jsonPath)
	if err != nil {
		return err
	}
	list, err := ReadUsers(*users)
	if err != nil {
		return err
	}
	if err := RecordFill(ctx, res, *dbURL, list, *keys, *retention, stderr); err != nil {
		return err
	}
	return res.Save(*jsonPath)
}

// runFilledCmd measures the filled point, adds it to the saved results and
// writes the report (see filled.go).
func runFilledCmd(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	cfg := FilledConfig{Log: stderr}
	var (
		jsonPath = fs.String("json", "", "the saved results, with the fill recorded")
		users    = fs.String("users", "", "file of `paymentsd users create` lines")
		duration = fs.Duration("duration", 10*time.Second, "measured window of every run")
		pgbench  = fs.String("pgbench", "pgbench", "pgbench binary, for fresh.sql on the filled database (empty: skip it)")
		md       = fs.String("md", "BENCHMARKS.md", "report to write")
		svg      = fs.String("svg", "docs/bench.svg", "plot to write")
	)
	fs.StringVar(&cfg.ServiceURL, "service", "", "base URL of paymentsd serve")
	fs.StringVar(&cfg.BareURL, "bare", "", "base URL of the bare service (paymentsd-bare)")
	fs.StringVar(&cfg.BenchURL, "db-url", "", "URL of the bench database")
	fs.StringVar(&cfg.AdminURL, "admin-url", "", "URL of another database on the server, where the database's waits are sampled from (empty: they are not)")
	fs.StringVar(&cfg.Scripts, "scripts", "harness/bench/pgbench", "directory of fresh.sql")
	processesFlag(fs, &cfg.Processes)
	fs.DurationVar(&cfg.ReaperInterval, "reaper-interval", 5*time.Second, "the service's PAYMENTSD_REAPER_INTERVAL")
	fs.DurationVar(&cfg.KeyRetention, "key-retention", 24*time.Hour, "the service's PAYMENTSD_KEY_RETENTION")
	fs.DurationVar(&cfg.CatchUp, "catch-up", 5*time.Minute, "how long to wait for the reaper to work off the fill's backlog")
	fs.IntVar(&cfg.ReplayKeys, "replay-keys", FilledReplayKeys, "filled keys the replays cycle over")
	if fs.Parse(args) != nil || fs.NArg() > 0 || *jsonPath == "" || cfg.ServiceURL == "" || cfg.BareURL == "" || cfg.BenchURL == "" ||
		*users == "" || *duration <= 0 || cfg.ReaperInterval <= 0 || cfg.KeyRetention <= 0 || cfg.ReplayKeys < 1 {
		return errUsage
	}
	res, err := LoadResults(*jsonPath)
	if err != nil {
		return err
	}
	if cfg.Users, err = ReadUsers(*users); err != nil {
		return err
	}
	cfg.Duration = *duration
	cfg.Warmup = min(max(*duration/10, 500*time.Millisecond), 2*time.Second)
	if *pgbench != "" {
		if cfg.Scripts, err = filepath.Abs(cfg.Scripts); err != nil {
			return err
		}
		logDir, err := os.MkdirTemp("", "paymentsd-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(logDir)
		cfg.PGBench = newPGBench(*pgbench, cfg.BenchURL, *duration, logDir, cfg.Users, res.ReplayKeys)
	}
	if err := RunFilled(ctx, cfg, res); err != nil {
		return err
	}
	if err := res.Save(*jsonPath); err != nil {
		return err
	}
	if err := writeReport(res, *md, *svg); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n%s\n%s\nWrote %s and %s.\n", Tables(res), FilledTable(res), *md, *svg)
	return nil
}

// writeReport writes the summary (md), the plot (svg) and, beside the plot,
// the full report (bench-report.md) the summary links to.
func writeReport(res *Results, md, svg string) error {
	full := filepath.Join(filepath.Dir(svg), "bench-report.md")
	rel := func(from, to string) string {
		r, err := filepath.Rel(filepath.Dir(from), to)
		if err != nil {
			return filepath.ToSlash(to)
		}
		return filepath.ToSlash(r)
	}
	for path, text := range map[string]string{
		md:   Summary(res, rel(md, svg), rel(md, full)),
		full: Markdown(res, rel(full, svg)),
		svg:  SVG(res),
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// parseConns reads "1,8,32,64": positive and increasing.
func parseConns(s string) ([]int, error) {
	var conns []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(conns) > 0 && n <= conns[len(conns)-1]) {
			return nil, fmt.Errorf("-conns must be increasing positive integers, got %q", s)
		}
		conns = append(conns, n)
	}
	return conns, nil
}

// processesFlag defines -pids, parsed into p: the process ids whose CPU
// time each run reads.
func processesFlag(fs *flag.FlagSet, p *Processes) {
	fs.Func("pids", "process ids whose CPU time each run reads: service=PID,bare=PID,least=PID,emulator=PID", func(s string) (err error) {
		*p, err = ParseProcesses(s)
		return err
	})
}

func sqlProfileCmd(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	hz := fs.Float64("hz", 499, "perf record's sampling frequency")
	a, b := fs.String("a", "fresh.sql", "the side measured"), fs.String("b", "least.sql", "the side it is read against")
	if fs.Parse(args) != nil || fs.NArg() == 0 || *hz <= 0 {
		return errUsage
	}
	var runs []SQLProfileRun
	for _, arg := range fs.Args() {
		run, err := ParseSQLProfileRun(arg)
		if err != nil {
			return err
		}
		runs = append(runs, run)
	}
	profiles, err := LoadSQLProfiles(runs)
	if err != nil {
		return err
	}
	pa, pb := profiles[*a], profiles[*b]
	if pa == nil || pb == nil || pa.Total == 0 || pb.Total == 0 {
		return fmt.Errorf("sql-profile: no postgres samples for %s or %s", *a, *b)
	}
	WriteSQLProfileTable(stdout, *a, *b, pa, pb, *hz)
	return nil
}
