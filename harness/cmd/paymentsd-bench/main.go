// Command paymentsd-bench is the engine of `make bench`: it loads a running
// paymentsd and its Stripe emulator, measures the SQL ceilings with pgbench,
// and writes BENCHMARKS.md and docs/bench.svg. scripts/bench.sh sets the
// stage and runs it; see harness/bench.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/paymentsd/paymentsd/harness/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bench.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
