package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// # What a request costs the machine's CPUs
//
// A Go profile sees one process. But the service's ratio to the bare
// service is a ratio of throughputs on a machine whose two cores the load
// generator, Postgres and the emulator share with it, so a request that
// costs the service's process more may cost the others more too (more
// wake-ups at a lower throughput, a wider row to send). Linux counts every
// process's CPU time, user and system, in /proc/PID/stat, and the whole
// machine's, busy and idle, in /proc/stat; read right before and after
// each of a side's runs and divided by the requests they answered, as
// pg_stat_statements is (DBCost), they say where all of a request's CPU
// went (CPUCost): the service's process, the bare service's, every
// postgres process on the machine (the children that exited meanwhile
// included, through their parent's count of them), the emulator's, the
// load generator's (this process, and pgbench, its child, for fresh.sql),
// and the rest (the kernel's own work, every other process), with the
// time no CPU had anything to do.

// Processes are the process ids of the programs a run measures; 0 where
// one is not known, whose time then counts in the rest.
type Processes struct {
	Service, Bare, Emulator int
	// Least is the bare service over the least SQL. Its CPU time counts
	// as the bare service's: only one of the two bare services is ever
	// loaded at a time, so a run's bare time is that of the one it loads.
	Least int
}

// ParseProcesses reads "service=PID,bare=PID,emulator=PID" (any of them,
// in any order; empty for none).
func ParseProcesses(s string) (Processes, error) {
	var p Processes
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, value, _ := strings.Cut(part, "=")
		pid, err := strconv.Atoi(value)
		if err != nil || pid <= 0 {
			return p, fmt.Errorf("process ids: %q is not name=PID", part)
		}
		switch name {
		case "service":
			p.Service = pid
		case "bare":
			p.Bare = pid
		case "emulator":
			p.Emulator = pid
		case "least":
			p.Least = pid
		default:
			return p, fmt.Errorf("process ids: unknown process %q (service, bare, least, emulator)", name)
		}
	}
	return p, nil
}

// clockTicks is the unit of /proc's times, USER_HZ, which Linux fixes at
// 100 a second on every architecture it exports them on.
const clockTicks = 100

// cpuRoles are the processes a CPUCost tells apart, in its order.
type cpuRoles struct {
	service, bare, emulator, postgres, load time.Duration
}

// cpuReading is the CPU time used up to a moment: by each process of
// interest, and by the whole machine, busy and idle.
type cpuReading struct {
	roles      cpuRoles
	busy, idle time.Duration
}

// errNoProc means /proc cannot be read: not Linux, or no access.
var errNoProc = errors.New("/proc/stat cannot be read")

// readCPU reads the CPU time used so far, or fails when /proc cannot be
// read. A process id that no longer exists counts nothing.
func readCPU(procs Processes) (cpuReading, error) {
	var r cpuReading
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return r, errNoProc
	}
	if r.busy, r.idle, err = machineCPU(stat); err != nil {
		return r, err
	}
	one := func(pid int) time.Duration {
		if pid == 0 {
			return 0
		}
		t, _ := processCPU(fmt.Sprintf("/proc/%d/stat", pid), false)
		return t
	}
	r.roles.service, r.roles.bare, r.roles.emulator = one(procs.Service), one(procs.Bare)+one(procs.Least), one(procs.Emulator)
	r.roles.load, _ = processCPU("/proc/self/stat", true)
	entries, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return r, err
	}
	for _, path := range entries {
		if t, ok := postgresCPU(path); ok {
			r.roles.postgres += t
		}
	}
	return r, nil
}

// machineCPU reads the first line of /proc/stat: the time all CPUs spent
// busy (user, nice, system, interrupts, stolen) and idle (idle, waiting on
// I/O).
func machineCPU(stat []byte) (busy, idle time.Duration, err error) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks [8]int64
	for i := range ticks {
		if ticks[i], err = strconv.ParseInt(fields[i+1], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
	}
	user, nice, system, idleT, iowait, irq, softirq, steal := ticks[0], ticks[1], ticks[2], ticks[3], ticks[4], ticks[5], ticks[6], ticks[7]
	return fromTicks(user + nice + system + irq + softirq + steal), fromTicks(idleT + iowait), nil
}

// statFields are a /proc/PID/stat line's fields after the command's
// name, which is in parentheses and may hold anything, spaces included:
// the state is the first of them.
func statFields(line []byte) (comm string, fields []string, ok bool) {
	open, end := bytes.IndexByte(line, '('), bytes.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return "", nil, false
	}
	return string(line[open+1 : end]), strings.Fields(string(line[end+1:])), true
}

// processCPU reads a process's user and system time, and with children
// that of its children it has waited for.
func processCPU(path string, children bool) (time.Duration, bool) {
	_, fields, ok := readStat(path)
	if !ok {
		return 0, false
	}
	return timesOf(fields, children)
}

// postgresCPU is processCPU of a postgres process, children included (the
// postmaster's: the backends and workers that exited); false for any
// other process.
func postgresCPU(path string) (time.Duration, bool) {
	comm, fields, ok := readStat(path)
	if !ok || comm != "postgres" {
		return 0, false
	}
	return timesOf(fields, true)
}

// readStat reads a /proc/PID/stat file (statFields); false when the
// process is gone or the line is not one.
func readStat(path string) (comm string, fields []string, ok bool) {
	line, err := os.ReadFile(path)
	if err != nil {
		return "", nil, false
	}
	return statFields(line)
}

// timesOf adds utime and stime (fields 14 and 15 of the line, 12 and 13
// after the name), and cutime and cstime after them with children.
func timesOf(fields []string, children bool) (time.Duration, bool) {
	n := 2
	if children {
		n = 4
	}
	if len(fields) < 11+n {
		return 0, false
	}
	var sum int64
	for _, f := range fields[11 : 11+n] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, false
		}
		sum += v
	}
	return fromTicks(sum), true
}

func fromTicks(t int64) time.Duration { return time.Duration(t) * time.Second / clockTicks }

// cpuSum adds the CPU time of a side's runs and the requests they
// answered.
type cpuSum struct {
	roles      cpuRoles
	busy, idle time.Duration
	requests   int
}

// add adds what was used between a and b, and the requests answered
// meanwhile; nothing when either reading is missing.
func (s *cpuSum) add(a, b *cpuReading, requests int) {
	if a == nil || b == nil {
		return
	}
	s.roles.service += b.roles.service - a.roles.service
	s.roles.bare += b.roles.bare - a.roles.bare
	s.roles.emulator += b.roles.emulator - a.roles.emulator
	s.roles.postgres += b.roles.postgres - a.roles.postgres
	s.roles.load += b.roles.load - a.roles.load
	s.busy += b.busy - a.busy
	s.idle += b.idle - a.idle
	s.requests += requests
}

// CPUCost is the machine's CPU time for one request of a side's runs, on
// average, in microseconds, by process (see the top of proccpu.go). Rest
// is the busy time no process above accounts for; Busy is all of it, and
// Idle the time the CPUs had nothing to do.
type CPUCost struct {
	Requests int     `json:"requests"`
	Service  float64 `json:"service_us"`
	Bare     float64 `json:"bare_us"`
	Emulator float64 `json:"emulator_us"`
	Postgres float64 `json:"postgres_us"`
	Load     float64 `json:"load_us"`
	Rest     float64 `json:"rest_us"`
	Busy     float64 `json:"busy_us"`
	Idle     float64 `json:"idle_us"`
}

// cost is the sum per request; nil when nothing was read.
func (s *cpuSum) cost() *CPUCost {
	if s.requests == 0 {
		return nil
	}
	per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(s.requests) }
	c := &CPUCost{
		Requests: s.requests, Service: per(s.roles.service), Bare: per(s.roles.bare), Emulator: per(s.roles.emulator),
		Postgres: per(s.roles.postgres), Load: per(s.roles.load), Busy: per(s.busy), Idle: per(s.idle),
	}
	c.Rest = c.Busy - c.Service - c.Bare - c.Emulator - c.Postgres - c.Load
	return c
}
