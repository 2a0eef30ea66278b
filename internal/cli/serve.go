package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/app"
	"github.com/paymentsd/paymentsd/internal/config"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/logging"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/workers"
)

func serveCmd(ctx context.Context, args []string, log zerolog.Logger) error {
	fs := newFlagSet("serve")
	migrate := fs.Bool("migrate", false, "apply pending migrations before serving")
	if args, err := parseArgs(fs, args); err != nil {
		return err
	} else if err := noMoreArgs(args); err != nil {
		return err
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	pool, err := db.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()

	if *migrate {
		if err := db.MigrateUp(ctx, pool); err != nil {
			return err
		}
	} else if pending, err := db.PendingMigrations(ctx, pool); err != nil {
		return err
	} else if pending {
		return errors.New("the database has pending migrations: run `paymentsd migrate` or `paymentsd serve --migrate`")
	}

	a, err := app.New(ctx, pool, appOptions(cfg, log))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("error listening on %s: %w", cfg.Addr, err)
	}
	log.Info().Str("addr", ln.Addr().String()).Str("instance_id", a.InstanceID.String()).
		Bool("stripe_emulator", cfg.StripeAPIBase != "").Dur("lock_timeout", cfg.LockTimeout).
		Bool("river_poll_only", workers.PollOnly(pool, workers.Config{PollOnly: cfg.PollOnly})).Msg("serving")
	return a.Run(ctx, ln)
}

// appOptions are the service's options as the environment sets them.
func appOptions(cfg *config.Config, log zerolog.Logger) app.Options {
	return app.Options{
		Logger:       log,
		LeaseTimeout: cfg.LockTimeout,
		Stripe: payments.StripeConfig{
			SecretKey: cfg.StripeSecretKey,
			APIBase:   cfg.StripeAPIBase,
			Timeout:   cfg.StripeTimeout,

			VisibilityMargin: cfg.StripeVisibilityMargin,
		},
		ShutdownGrace:     cfg.ShutdownGrace,
		WebhookSecret:     cfg.StripeWebhookSecret,
		RateLimit:         cfg.RateLimit,
		HeartbeatInterval: cfg.HeartbeatInterval,
		Workers: workers.Config{
			Completer: workers.CompleterConfig{Interval: cfg.CompleterInterval},
			Reaper:    workers.ReaperConfig{Interval: cfg.ReaperInterval, Retention: cfg.KeyRetention},
			PollOnly:  cfg.PollOnly,
			// River's own logs (warnings and errors) in the service's shape.
			RiverLog: slog.New(logging.NewSlogHandler(log, slog.LevelWarn)),
		},
	}
}

// offlineApp assembles the service without serving it, for a command that
// works through its parts (an operator's, say). Close it when done.
func offlineApp(ctx context.Context, log zerolog.Logger) (*app.App, func(), error) {
	cfg, err := config.Load()
	if err != nil {
		return nil, nil, err
	}
	pool, err := db.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, nil, err
	}
	if pending, err := db.PendingMigrations(ctx, pool); err != nil || pending {
		pool.Close()
		return nil, nil, errors.Join(err, errors.New("the database has pending migrations: run `paymentsd migrate` first"))
	}
	a, err := app.New(ctx, pool, appOptions(cfg, log))
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return a, pool.Close, nil
}
