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
  paymentsd-bench free-port                       print a free TCP port on 127.0.0.1
  paymentsd-bench wait -url URL [-timeout 30s]    wait until URL answers 200
  paymentsd-bench run [flags]                     measure; write the JSON results and the report
  paymentsd-bench report -json F -md F -svg F     render the report again from saved results
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
	fs.IntVar(&cfg.SlowConns, "slow-conns", SlowConns, "payments in flight at the slow-processor point (0: skip it)")
	fs.DurationVar(&cfg.SlowLatency, "slow-latency", SlowLatency, "the emulator's latency at the slow-processor point")
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
	fs.StringVar(&cfg.Scripts, "scripts", "bench/pgbench", "directory of fresh.sql and replay.sql")
	fs.StringVar(&cfg.Command, "command", "make bench", "the command to show in the report")
	if fs.Parse(args) != nil || fs.NArg() > 0 || cfg.ServiceURL == "" || cfg.BareURL == "" || cfg.EmulatorURL == "" ||
		cfg.AdminURL == "" || cfg.BenchURL == "" || *users == "" || *duration <= 0 || cfg.SlowConns < 0 || cfg.SlowLatency <= 0 {
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
	*cfg.PGBench = PGBench{
		Path: cfg.PGBench.Path, URL: cfg.BenchURL, Duration: *duration, LogDir: logDir,
		Vars: map[string]string{
			"umin":  strconv.FormatInt(cfg.Users[0].ID, 10),
			"umax":  strconv.FormatInt(cfg.Users[len(cfg.Users)-1].ID, 10),
			"nkeys": strconv.Itoa(cfg.ReplayKeys),
		},
	}

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

// writeReport writes the Markdown report and the plot it links to.
func writeReport(res *Results, md, svg string) error {
	rel, err := filepath.Rel(filepath.Dir(md), svg)
	if err != nil {
		rel = svg
	}
	for path, text := range map[string]string{md: Markdown(res, filepath.ToSlash(rel)), svg: SVG(res)} {
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
