package cli

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/stripefake"
)

func stripefakeCmd(ctx context.Context, args []string, log zerolog.Logger) error {
	fs := newFlagSet("stripefake")
	addr := fs.String("addr", "127.0.0.1:12111", "listen on address `A`")
	if args, err := parseArgs(fs, args); err != nil {
		return err
	} else if err := noMoreArgs(args); err != nil {
		return err
	}
	log.Info().Str("addr", *addr).Msg("serving the Stripe emulator")
	return stripefake.ListenAndServe(ctx, *addr, stripefake.New(stripefake.Options{Logger: log}))
}
