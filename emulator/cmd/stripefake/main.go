// Command stripefake serves the Stripe emulator (package stripefake) on its
// own: for `make run`, the bench and chaos runs, and the demo stack of
// docker-compose.yml. `paymentsd stripefake` runs this program.
//
//	stripefake [--addr A] [--authorization-window D] [--search-rate N] [--webhook-url U --webhook-secret S [--webhook-latency D]]
//
// A command line that does not parse gets one line naming what is wrong and
// the usage on stderr, with exit code 2; --help prints the usage and the
// flags on stdout, with exit code 0. SIGINT or SIGTERM stops it gracefully.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

const usageLine = "usage: stripefake [--addr A] [--authorization-window D] [--search-rate N] [--webhook-url U --webhook-secret S [--webhook-latency D]]"

// about is the help's description of the program.
const about = `Serves the stateful Stripe emulator: PaymentIntents (with manual capture: capture, cancel)
and Refunds with Stripe's idempotency rules, and admin endpoints under /_fake/ (stats, fault
injection, events, disputes). They have no authentication: keep it on loopback. With --webhook-url
it signs a Stripe event for every state change with --webhook-secret and POSTs it there, retrying
until answered 2xx.`

// levelEnv sets the log level, as it does for paymentsd: trace, debug,
// info (the default), warn or error. Logs are JSON lines on stderr, or
// readable lines on a terminal.
const levelEnv = "PAYMENTSD_LOG_LEVEL"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the emulator with the command line args (without the program
// name) until ctx is done, and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, addr, err := parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		writeHelp(stdout)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "stripefake: %v\n%s\nRun 'stripefake --help' for its flags.\n", err, usageLine)
		return 2
	}
	log, err := newLogger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "stripefake: %v\n", err)
		return 1
	}
	opts.Logger = log
	ev := log.Info().Str("addr", addr).Dur("authorization_window", opts.AuthorizationWindow)
	if opts.WebhookURL != "" {
		ev = ev.Str("webhook_url", opts.WebhookURL)
	}
	ev.Msg("serving the Stripe emulator")
	if err := stripefake.ListenAndServe(ctx, addr, stripefake.New(opts)); err != nil {
		log.Error().Err(err).Msg("stripefake failed")
		return 1
	}
	return 0
}

// flags are the program's flags; parse fills them in.
func flags() (*flag.FlagSet, *string, *stripefake.Options) {
	fs := flag.NewFlagSet("stripefake", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts := &stripefake.Options{}
	addr := fs.String("addr", "127.0.0.1:12111", "listen on address `A`")
	fs.DurationVar(&opts.AuthorizationWindow, "authorization-window", 7*24*time.Hour, "cancel a PaymentIntent confirmed with capture_method=manual and not captured `D` after its creation (cancellation_reason automatic), as Stripe does after 7 days")
	fs.IntVar(&opts.SearchRate, "search-rate", 0, "answer at most `N` searches a second, refusing the rest with 429 rate_limit as Stripe does beyond its 20 a second; 0: no limit")
	fs.StringVar(&opts.WebhookURL, "webhook-url", "", "send a signed Stripe event for every state change to `U` (several URLs, comma-separated, are taken in turn)")
	fs.StringVar(&opts.WebhookSecret, "webhook-secret", "", "sign the events with secret `S`: the endpoint's STRIPE_WEBHOOK_SECRET")
	fs.DurationVar(&opts.WebhookLatency, "webhook-latency", 100*time.Millisecond, "send each event `D` after its change at the earliest, as Stripe's asynchronous delivery does, after the API's answer")
	return fs, addr, opts
}

// parse reads the command line: the emulator's options and its address.
// It answers flag.ErrHelp for -h or --help.
func parse(args []string) (stripefake.Options, string, error) {
	fs, addr, opts := flags()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return stripefake.Options{}, "", err
		}
		// The flag package names flags with one dash; the help, with two.
		msg := strings.Replace(err.Error(), "flag provided but not defined: -", "unknown flag: --", 1)
		msg = strings.Replace(msg, "argument: -", "argument: --", 1)
		msg = strings.Replace(msg, "for flag -", "for flag --", 1)
		return stripefake.Options{}, "", errors.New(msg)
	}
	switch {
	case fs.NArg() > 0:
		return stripefake.Options{}, "", fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case opts.WebhookURL != "" && opts.WebhookSecret == "":
		return stripefake.Options{}, "", errors.New("--webhook-url needs --webhook-secret")
	case opts.WebhookSecret != "" && opts.WebhookURL == "":
		return stripefake.Options{}, "", errors.New("--webhook-secret needs --webhook-url")
	case opts.WebhookLatency < 0:
		return stripefake.Options{}, "", fmt.Errorf("--webhook-latency must not be negative, got %s", opts.WebhookLatency)
	case opts.SearchRate < 0:
		return stripefake.Options{}, "", fmt.Errorf("--search-rate must not be negative, got %d", opts.SearchRate)
	case opts.AuthorizationWindow <= 0:
		return stripefake.Options{}, "", fmt.Errorf("--authorization-window must be positive, got %s", opts.AuthorizationWindow)
	}
	if opts.WebhookURL != "" {
		for _, raw := range strings.Split(opts.WebhookURL, ",") {
			if u, err := url.Parse(strings.TrimSpace(raw)); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return stripefake.Options{}, "", fmt.Errorf("--webhook-url must be http or https URLs, got %q", raw)
			}
		}
	}
	return *opts, *addr, nil
}

// writeHelp writes the usage, what the program does, its flags, its
// environment and an example.
func writeHelp(w io.Writer) {
	fmt.Fprintf(w, "%s\n\n%s\n\nFlags:\n", usageLine, about)
	fs, _, _ := flags()
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s %s\n        %s", f.Name, name, usage)
		if f.DefValue != "" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
	fmt.Fprintf(w, "\nEnvironment:\n  %s  trace, debug, info, warn or error (default info); logs are JSON on stderr\n", levelEnv)
	fmt.Fprint(w, "\nExample:\n  stripefake --addr 127.0.0.1:12111 --webhook-url http://127.0.0.1:8080/webhooks/stripe --webhook-secret whsec_local\n")
}

// newLogger returns the emulator's logger writing to w at the level
// levelEnv names: JSON lines, or readable lines when w is a terminal.
func newLogger(w io.Writer) (zerolog.Logger, error) {
	level := zerolog.InfoLevel
	switch v := os.Getenv(levelEnv); v {
	case "":
	case "trace", "debug", "info", "warn", "error":
		level, _ = zerolog.ParseLevel(v)
	default:
		return zerolog.Nop(), fmt.Errorf("%s must be one of trace, debug, info, warn, error (or unset for info), got %q", levelEnv, v)
	}
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000"}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}
