// Command paymentsd-profiled is paymentsd with Go's profiles served beside
// it, for `BENCH_PROFILE=1 make bench`: the product's own command line
// (internal/cli, exactly as cmd/paymentsd runs it) and, on a listener of
// its own, net/http/pprof with the bare service's handler (package
// profiling), which the paymentsd binary does not link. Keep the address
// on loopback.
//
//	paymentsd-profiled -pprof 127.0.0.1:6060 serve
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/paymentsd/paymentsd/harness/profiling"
	"github.com/paymentsd/paymentsd/internal/cli"
)

func main() {
	fs := flag.NewFlagSet("paymentsd-profiled", flag.ExitOnError)
	pprofAddr := fs.String("pprof", "", "address to serve Go's profiles on (net/http/pprof)")
	_ = fs.Parse(os.Args[1:]) // up to the paymentsd command: the rest is its own
	if *pprofAddr == "" || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: paymentsd-profiled -pprof host:port COMMAND [ARGS]: a paymentsd command, Go's profiles served on host:port")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := 1
	if err := profiling.Serve(ctx, *pprofAddr); err != nil {
		fmt.Fprintln(os.Stderr, "paymentsd-profiled:", err)
	} else {
		code = cli.Run(ctx, fs.Args(), os.Stdout, os.Stderr)
	}
	stop()
	os.Exit(code)
}
