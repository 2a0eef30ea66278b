// Package config reads paymentsd's environment.
package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/paymentsd/paymentsd/internal/logging"
)

// Config is the environment of `paymentsd serve`.
type Config struct {
	DatabaseURL     string
	Addr            string
	StripeSecretKey string
	StripeAPIBase   string
	// StripeWebhookSecret mounts POST /webhooks/stripe when set.
	StripeWebhookSecret string
	StripeTimeout       time.Duration
	// StripeVisibilityMargin: see payments.StripeConfig.VisibilityMargin.
	StripeVisibilityMargin time.Duration
	LockTimeout            time.Duration
	KeyRetention           time.Duration
	RateLimit              int
	LogLevel               string

	CompleterInterval time.Duration
	ReaperInterval    time.Duration
	HeartbeatInterval time.Duration
	ShutdownGrace     time.Duration
	// PollOnly makes River poll instead of LISTEN, as it does by itself
	// when DATABASE_URL's query exec mode says transaction pooling.
	PollOnly bool
}

// EmulatorSecretKey is the key used with STRIPE_API_BASE and no
// STRIPE_SECRET_KEY: the emulator takes any test-mode key.
const EmulatorSecretKey = "sk_test_paymentsd_emulator"

// Load reads the environment, applying the documented defaults.
func Load() (*Config, error) {
	cfg := &Config{
		DatabaseURL:     os.Getenv("DATABASE_URL"),
		Addr:            env("PAYMENTSD_ADDR", "127.0.0.1:8080"),
		StripeSecretKey: os.Getenv("STRIPE_SECRET_KEY"),
		StripeAPIBase:   os.Getenv("STRIPE_API_BASE"),

		StripeWebhookSecret: os.Getenv("STRIPE_WEBHOOK_SECRET"),
		LogLevel:            env("PAYMENTSD_LOG_LEVEL", "info"),
	}
	var errs []error
	cfg.LockTimeout = duration("PAYMENTSD_LOCK_TIMEOUT", 90*time.Second, &errs)
	cfg.KeyRetention = duration("PAYMENTSD_KEY_RETENTION", 24*time.Hour, &errs)
	cfg.StripeTimeout = duration("PAYMENTSD_STRIPE_TIMEOUT", 30*time.Second, &errs)
	cfg.StripeVisibilityMargin = duration("PAYMENTSD_STRIPE_VISIBILITY_MARGIN", time.Minute, &errs)
	cfg.RateLimit = integer("PAYMENTSD_RATE_LIMIT", 100, &errs)
	cfg.CompleterInterval = duration("PAYMENTSD_COMPLETER_INTERVAL", 10*time.Second, &errs)
	cfg.ReaperInterval = duration("PAYMENTSD_REAPER_INTERVAL", time.Minute, &errs)
	cfg.HeartbeatInterval = duration("PAYMENTSD_HEARTBEAT_INTERVAL", 5*time.Second, &errs)
	cfg.ShutdownGrace = duration("PAYMENTSD_SHUTDOWN_GRACE", 30*time.Second, &errs)
	cfg.PollOnly = boolean("PAYMENTSD_POLL_ONLY", false, &errs)

	if cfg.DatabaseURL == "" {
		errs = append(errs, errors.New("DATABASE_URL is required"))
	}
	if cfg.StripeSecretKey == "" {
		if cfg.StripeAPIBase == "" {
			errs = append(errs, errors.New("STRIPE_SECRET_KEY is required unless STRIPE_API_BASE points at an emulator"))
		}
		cfg.StripeSecretKey = EmulatorSecretKey
	}
	if cfg.StripeTimeout >= cfg.LockTimeout {
		errs = append(errs, errors.New("PAYMENTSD_STRIPE_TIMEOUT must be shorter than PAYMENTSD_LOCK_TIMEOUT, or a live call could lose its lease"))
	}
	if _, err := logging.ParseLevel(os.Getenv(logging.LevelEnv)); err != nil {
		errs = append(errs, err)
	}
	if cfg.RateLimit < 0 {
		errs = append(errs, errors.New("PAYMENTSD_RATE_LIMIT must not be negative"))
	}
	return cfg, errors.Join(errs...)
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func duration(name string, def time.Duration, errs *[]error) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		*errs = append(*errs, fmt.Errorf("%s must be a positive duration such as 90s, got %q", name, v))
		return def
	}
	return d
}

func integer(name string, def int, errs *[]error) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("%s must be an integer, got %q", name, v))
		return def
	}
	return n
}

func boolean(name string, def bool, errs *[]error) bool {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("%s must be 1 or 0 (true or false), got %q", name, v))
		return def
	}
	return b
}
