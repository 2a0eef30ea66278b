package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PGBench runs pgbench scripts against the bench database.
type PGBench struct {
	// Path is the pgbench binary.
	Path string
	// URL is the bench database.
	URL string
	// Vars are passed to every script with -D.
	Vars map[string]string
	// Duration is how long each run lasts; pgbench takes whole seconds.
	Duration time.Duration
	// LogDir holds the per-transaction logs while they are read.
	LogDir string
}

var (
	tpsRe       = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	processedRe = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)`)
	failedRe    = regexp.MustCompile(`(?m)^number of failed transactions: (\d+)`)
)

// errNothingProcessed is a pgbench run that finished no transaction at all
// and failed none: every client waited out the whole run, as when a shared
// machine stalls the cluster's disk for longer than the run.
var errNothingProcessed = errors.New("no transaction finished within the run")

// Version is pgbench's own version line.
func (p *PGBench) Version(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, p.Path, "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// Run runs script with conns clients in prepared mode, without vacuuming,
// on two threads, for the configured duration, and reads its throughput and
// the latency percentiles of its per-transaction log. A run that aborts or
// fails any transaction is an error: the ceiling would be wrong.
func (p *PGBench) Run(ctx context.Context, script string, conns int) (Ceiling, error) {
	secs := max(1, int(math.Ceil(p.Duration.Seconds())))
	prefix := filepath.Join(p.LogDir, strings.TrimSuffix(filepath.Base(script), ".sql")+"_c"+strconv.Itoa(conns))
	args := []string{"-M", "prepared", "-n", "-T", strconv.Itoa(secs), "-c", strconv.Itoa(conns), "-j", "2",
		"-f", script, "-l", "--log-prefix=" + prefix}
	keys := make([]string, 0, len(p.Vars))
	for k := range p.Vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		args = append(args, "-D", k+"="+p.Vars[k])
	}
	args = append(args, p.URL)

	cmd := exec.CommandContext(ctx, p.Path, args...)
	cmd.Dir = p.LogDir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	defer removeLogs(prefix)
	text := out.String()
	if runErr != nil {
		return Ceiling{}, fmt.Errorf("pgbench %s -c %d failed (%v):\n%s", filepath.Base(script), conns, runErr, tail(text, 20))
	}
	var c Ceiling
	if m := processedRe.FindStringSubmatch(text); m != nil && m[1] == "0" {
		if f := failedRe.FindStringSubmatch(text); f == nil || f[1] == "0" {
			return c, fmt.Errorf("pgbench %s -c %d: %w", filepath.Base(script), conns, errNothingProcessed)
		}
	}
	m := tpsRe.FindStringSubmatch(text)
	if m == nil {
		return c, fmt.Errorf("pgbench %s -c %d printed no tps:\n%s", filepath.Base(script), conns, tail(text, 20))
	}
	c.TPS, _ = strconv.ParseFloat(m[1], 64)
	if m := processedRe.FindStringSubmatch(text); m != nil {
		c.Transactions, _ = strconv.Atoi(m[1])
	}
	if m := failedRe.FindStringSubmatch(text); m != nil {
		c.Failed, _ = strconv.Atoi(m[1])
	}
	if c.Failed > 0 || c.Transactions == 0 {
		return c, fmt.Errorf("pgbench %s -c %d: %d transactions, %d failed:\n%s", filepath.Base(script), conns, c.Transactions, c.Failed, tail(text, 20))
	}
	lat, err := readLatencies(prefix)
	if err != nil {
		return c, err
	}
	c.P50, c.P99 = ms(percentile(lat, 0.50)), ms(percentile(lat, 0.99))
	c.latencies = lat
	return c, nil
}

// readLatencies reads the latencies of every per-transaction log pgbench
// wrote under prefix (one file per thread), sorted. The third field of a
// line is the transaction's latency in microseconds.
func readLatencies(prefix string) ([]time.Duration, error) {
	files, err := filepath.Glob(prefix + ".*")
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("pgbench wrote no transaction log under %s", prefix)
	}
	var lat []time.Duration
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 {
				continue
			}
			us, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				continue
			}
			lat = append(lat, time.Duration(us)*time.Microsecond)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	slices.Sort(lat)
	return lat, nil
}

func removeLogs(prefix string) {
	files, _ := filepath.Glob(prefix + ".*")
	for _, f := range files {
		_ = os.Remove(f)
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
