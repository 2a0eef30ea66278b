package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/config"
)

// These tests set the environment, so they are not parallel.

func TestLoadDefaults(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://db")
	t.Setenv("STRIPE_API_BASE", "http://127.0.0.1:12111")
	cfg, err := config.Load()
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8080", cfg.Addr)
	require.Equal(t, 90*time.Second, cfg.LockTimeout)
	require.Equal(t, "info", cfg.LogLevel)
	require.Equal(t, config.EmulatorSecretKey, cfg.StripeSecretKey)
	require.False(t, cfg.PollOnly)

	t.Setenv("PAYMENTSD_POLL_ONLY", "1")
	cfg, err = config.Load()
	require.NoError(t, err)
	require.True(t, cfg.PollOnly)
}

func TestLoadRefusesAnUnknownLogLevel(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://db")
	t.Setenv("STRIPE_API_BASE", "http://127.0.0.1:12111")
	t.Setenv("PAYMENTSD_LOG_LEVEL", "loud")
	_, err := config.Load()
	require.EqualError(t, err, `PAYMENTSD_LOG_LEVEL must be one of trace, debug, info, warn, error (or unset for info), got "loud"`)

	t.Setenv("PAYMENTSD_LOG_LEVEL", "debug")
	cfg, err := config.Load()
	require.NoError(t, err)
	require.Equal(t, "debug", cfg.LogLevel)
}

func TestLoadNamesEveryMalformedVariable(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	t.Setenv("STRIPE_API_BASE", "")
	t.Setenv("STRIPE_SECRET_KEY", "")
	t.Setenv("PAYMENTSD_LOCK_TIMEOUT", "soon")
	t.Setenv("PAYMENTSD_RATE_LIMIT", "-1")
	t.Setenv("PAYMENTSD_POLL_ONLY", "sometimes")
	_, err := config.Load()
	require.ErrorContains(t, err, "DATABASE_URL is required")
	require.ErrorContains(t, err, "STRIPE_SECRET_KEY is required")
	require.ErrorContains(t, err, `PAYMENTSD_LOCK_TIMEOUT must be a positive duration such as 90s, got "soon"`)
	require.ErrorContains(t, err, "PAYMENTSD_RATE_LIMIT must not be negative")
	require.ErrorContains(t, err, `PAYMENTSD_POLL_ONLY must be 1 or 0 (true or false), got "sometimes"`)
}
