// Command paymentsd is the payments API, its migrations and its user and
// key admin. See the README for the contract.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/paymentsd/paymentsd/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
