// Command paymentsd-profiled is paymentsd under a CPU profiler, for
// `BENCH_CPUPROFILE=cpu.pprof make bench`: the same command line and the
// same code as cmd/paymentsd, with the profile written to $BENCH_CPUPROFILE
// when the process stops (SIGINT or SIGTERM). Read it with
// `go tool pprof -top bin/paymentsd-profiled cpu.pprof`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/paymentsd/paymentsd/internal/cli"
)

func main() {
	path := os.Getenv("BENCH_CPUPROFILE")
	if path == "" {
		fmt.Fprintln(os.Stderr, "paymentsd-profiled: set BENCH_CPUPROFILE to the profile's path")
		os.Exit(2)
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "paymentsd-profiled:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "paymentsd-profiled:", err)
	}
	os.Exit(code)
}
