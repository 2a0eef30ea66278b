// Command paymentsd-bare is the bare service, the yardstick `make bench`
// reads paymentsd against (harness/bench/bare): a benchmark's instrument,
// never part of the service. DATABASE_URL, STRIPE_API_BASE and
// STRIPE_SECRET_KEY are read as paymentsd reads them. -pprof serves Go's
// profiles on a listener of its own (off unless given; `BENCH_PROFILE=1
// make bench` gives it). -sql least runs the least SQL that does the job,
// on a schema of its own (harness/bench/least), instead of the service's
// own: the second yardstick.
//
//	paymentsd-bare [-addr 127.0.0.1:8090] [-pprof 127.0.0.1:6061] [-sql own|least] -users users.jsonl
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/paymentsd/paymentsd/harness/bench/bare"
	"github.com/paymentsd/paymentsd/internal/config"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "address to listen on")
	pprofAddr := flag.String("pprof", "", "address to serve Go's profiles on (net/http/pprof); off when empty")
	users := flag.String("users", "", "file of `paymentsd users create` lines: the API keys to accept")
	sql := flag.String("sql", "own", "the SQL to run: own (the service's) or least (the least that does the job)")
	flag.Parse()
	if *users == "" || os.Getenv("DATABASE_URL") == "" || flag.NArg() > 0 || (*sql != "own" && *sql != "least") {
		fmt.Fprintln(os.Stderr, "usage: DATABASE_URL=… STRIPE_API_BASE=… paymentsd-bare [-addr host:port] [-pprof host:port] [-sql own|least] -users FILE")
		os.Exit(2)
	}
	key := os.Getenv("STRIPE_SECRET_KEY")
	if key == "" {
		key = config.EmulatorSecretKey
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := bare.Run(ctx, *addr, *pprofAddr, os.Getenv("DATABASE_URL"), os.Getenv("STRIPE_API_BASE"), key, *users, *sql == "least")
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "paymentsd-bare:", err)
		os.Exit(1)
	}
}
