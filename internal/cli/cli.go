// Package cli is paymentsd's command line: migrate, users create, serve and
// stripefake, as the contract in the README fixes them.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

const usage = `usage:
  paymentsd migrate [up|down|status]     apply the embedded migrations to DATABASE_URL
  paymentsd users create --email E       create a user; prints {"user_id","email","api_key"}
  paymentsd serve [--migrate]            serve the HTTP API and the background workers
  paymentsd stripefake [--addr A]        serve the Stripe emulator
  paymentsd keys list [--state unfinished|needs-attention] [--user N]
                                         unfinished keys, one JSON line each
  paymentsd keys resolve ID --as charged --payment-intent PI | --as not-charged
                                         settle a key that awaits an operator
`

// errUsage marks a command line that does not parse.
var errUsage = errors.New("usage")

// Run runs the command in args (without the program name) and returns the
// process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	log := newLogger(stderr)
	err := dispatch(ctx, args, stdout, log)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprint(stderr, usage)
		return 2
	}
	log.Error().Err(err).Msg("paymentsd failed")
	return 1
}

func dispatch(ctx context.Context, args []string, stdout io.Writer, log zerolog.Logger) error {
	if len(args) == 0 {
		return errUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "migrate":
		return migrateCmd(ctx, rest, stdout)
	case "users":
		if len(rest) == 0 || rest[0] != "create" {
			return errUsage
		}
		return usersCreateCmd(ctx, rest[1:], stdout)
	case "keys":
		switch {
		case len(rest) > 0 && rest[0] == "list":
			return keysListCmd(ctx, rest[1:], stdout)
		case len(rest) > 0 && rest[0] == "resolve":
			return keysResolveCmd(ctx, rest[1:], stdout, log)
		}
		return errUsage
	case "serve":
		return serveCmd(ctx, rest, log)
	case "stripefake":
		return stripefakeCmd(ctx, rest, log)
	}
	return errUsage
}

// newLogger logs JSON, or readable lines when stderr is a terminal.
func newLogger(w io.Writer) zerolog.Logger {
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000"}
	}
	level, err := zerolog.ParseLevel(os.Getenv("PAYMENTSD_LOG_LEVEL"))
	if err != nil || level == zerolog.NoLevel {
		level = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}
