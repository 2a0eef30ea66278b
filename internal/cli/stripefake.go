package cli

import (
	"context"
	"flag"
	"io"

	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/stripefake"
)

func stripefakeCmd(ctx context.Context, args []string, log zerolog.Logger) error {
	fs := flag.NewFlagSet("stripefake", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("addr", "127.0.0.1:12111", "listen address")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	log.Info().Str("addr", *addr).Msg("serving the Stripe emulator")
	return stripefake.ListenAndServe(ctx, *addr, stripefake.New(stripefake.Options{Logger: log}))
}
