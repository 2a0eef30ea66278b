package cli

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

func stripefakeCmd(ctx context.Context, args []string, log zerolog.Logger) error {
	fs := newFlagSet("stripefake")
	addr := fs.String("addr", "127.0.0.1:12111", "listen on address `A`")
	hookURL := fs.String("webhook-url", "", "send a signed Stripe event for every state change to `U` (several URLs, comma-separated, are taken in turn)")
	hookSecret := fs.String("webhook-secret", "", "sign the events with secret `S`: the endpoint's STRIPE_WEBHOOK_SECRET")
	hookLatency := fs.Duration("webhook-latency", 100*time.Millisecond, "send each event `D` after its change at the earliest, as Stripe's asynchronous delivery does, after the API's answer")
	if args, err := parseArgs(fs, args); err != nil {
		return err
	} else if err := noMoreArgs(args); err != nil {
		return err
	}
	switch {
	case *hookURL != "" && *hookSecret == "":
		return usageErrorf("--webhook-url needs --webhook-secret")
	case *hookSecret != "" && *hookURL == "":
		return usageErrorf("--webhook-secret needs --webhook-url")
	case *hookLatency < 0:
		return usageErrorf("--webhook-latency must not be negative, got %s", *hookLatency)
	}
	if *hookURL != "" {
		for _, raw := range strings.Split(*hookURL, ",") {
			if u, err := url.Parse(strings.TrimSpace(raw)); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usageErrorf("--webhook-url must be http or https URLs, got %q", raw)
			}
		}
	}
	ev := log.Info().Str("addr", *addr)
	if *hookURL != "" {
		ev = ev.Str("webhook_url", *hookURL)
	}
	ev.Msg("serving the Stripe emulator")
	return stripefake.ListenAndServe(ctx, *addr, stripefake.New(stripefake.Options{
		Logger: log, WebhookURL: *hookURL, WebhookSecret: *hookSecret, WebhookLatency: *hookLatency,
	}))
}
