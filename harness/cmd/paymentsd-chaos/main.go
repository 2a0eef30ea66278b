// Command paymentsd-chaos is the fault run behind `make chaos`: real
// clients against several paymentsd processes while processes are killed,
// Postgres restarts and the Stripe emulator misbehaves; then a check that
// every payment happened exactly once. See package harness/chaos.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/paymentsd/paymentsd/harness/chaos"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := chaos.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
