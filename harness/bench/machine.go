package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DescribeMachine gathers what the report says about the machine and the
// Postgres server at adminURL.
func DescribeMachine(ctx context.Context, adminURL string, pgbench *PGBench) Machine {
	m := Machine{
		CPUs:      runtime.NumCPU(),
		CPUModel:  procField("/proc/cpuinfo", "model name"),
		Memory:    memory(),
		GoVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	m.PgbenchVersion = pgbench.Version(ctx)
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return m
	}
	defer conn.Close(ctx)
	for _, s := range []struct {
		name string
		dst  *string
	}{
		{"server_version", &m.PostgresVersion},
		{"fsync", &m.Fsync},
		{"synchronous_commit", &m.SynchronousCommit},
		{"shared_buffers", &m.SharedBuffers},
		{"max_wal_size", &m.MaxWALSize},
		{"checkpoint_timeout", &m.CheckpointTimeout},
		{"shared_preload_libraries", &m.PreloadLibraries},
	} {
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", s.name).Scan(s.dst); err != nil {
			*s.dst = "unknown"
		}
	}
	return m
}

// procField is the first value of a "name : value" line of a /proc file.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == name {
			return strings.TrimSpace(value)
		}
	}
	return "unknown"
}

// memory is MemTotal from /proc/meminfo, in GiB.
func memory() string {
	kb, err := strconv.ParseFloat(strings.TrimSuffix(procField("/proc/meminfo", "MemTotal"), " kB"), 64)
	if err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%.1f GiB", kb/(1<<20))
}
