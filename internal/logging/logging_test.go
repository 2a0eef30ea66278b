package logging_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/logging"
)

// lines decodes the JSON lines in buf.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		out = append(out, m)
	}
	return out
}

func TestDurationsCarryTheirUnit(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	log.Info().Dur("lock_timeout", 90*time.Second).Dur("took", 1500*time.Microsecond).Msg("serving")
	got := lines(t, &buf)[0]
	require.Equal(t, "1m30s", got["lock_timeout"])
	require.Equal(t, "1.5ms", got["took"])
}

func TestParseLevel(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]zerolog.Level{
		"": zerolog.InfoLevel, "trace": zerolog.TraceLevel, "debug": zerolog.DebugLevel,
		"info": zerolog.InfoLevel, "warn": zerolog.WarnLevel, "error": zerolog.ErrorLevel,
	} {
		got, err := logging.ParseLevel(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"loud", "INFO", "warning", "fatal", "disabled", "1"} {
		_, err := logging.ParseLevel(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "PAYMENTSD_LOG_LEVEL must be one of trace, debug, info, warn, error")
		require.Contains(t, err.Error(), `"`+bad+`"`)
	}
}

func TestNewRefusesAnUnknownLevel(t *testing.T) {
	t.Setenv(logging.LevelEnv, "loud")
	_, err := logging.New(&bytes.Buffer{})
	require.ErrorContains(t, err, `got "loud"`)

	t.Setenv(logging.LevelEnv, "warn")
	var buf bytes.Buffer
	log, err := logging.New(&buf)
	require.NoError(t, err)
	log.Info().Msg("quiet")
	log.Warn().Msg("loud enough")
	got := lines(t, &buf)
	require.Len(t, got, 1)
	require.Equal(t, "warn", got[0]["level"])
	require.Equal(t, "loud enough", got[0]["message"])
	require.Contains(t, got[0], "time")
}

// A library logging through slog (River does) writes paymentsd's shape.
func TestSlogHandlerWritesZerologLines(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	zl := zerolog.New(&buf).With().Timestamp().Logger()
	log := slog.New(logging.NewSlogHandler(zl, slog.LevelWarn))

	log.Info("below the handler's level")
	log.Warn("job failed", "lock_timeout", 90*time.Second, "attempt", 2, "err", errors.New("boom"),
		slog.Group("job", "id", int64(7), "kind", "receipt"), slog.Group("empty"), "", "ignored")
	log.With("service", "river").WithGroup("elector").With("term", 3).Error("lost leadership", "after", 2*time.Second)
	log.WithGroup("unused").Error("no attrs")

	got := lines(t, &buf)
	require.Len(t, got, 3)
	first := got[0]
	require.Equal(t, "warn", first["level"])
	require.Equal(t, "job failed", first["message"])
	require.Contains(t, first, "time")
	require.NotContains(t, first, "msg")
	require.Equal(t, "1m30s", first["lock_timeout"])
	require.EqualValues(t, 2, first["attempt"])
	require.Equal(t, "boom", first["err"])
	require.Equal(t, map[string]any{"id": float64(7), "kind": "receipt"}, first["job"])
	require.NotContains(t, first, "empty")
	require.NotContains(t, first, "")

	second := got[1]
	require.Equal(t, "error", second["level"])
	require.Equal(t, "river", second["service"])
	require.Equal(t, map[string]any{"term": float64(3), "after": "2s"}, second["elector"])

	require.Equal(t, "no attrs", got[2]["message"])
	require.NotContains(t, got[2], "unused")
}

func TestSlogHandlerFollowsTheLoggersLevel(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := logging.NewSlogHandler(zerolog.New(&buf).Level(zerolog.ErrorLevel), slog.LevelDebug)
	require.False(t, h.Enabled(t.Context(), slog.LevelWarn))
	require.True(t, h.Enabled(t.Context(), slog.LevelError))
	slog.New(h).Warn("dropped")
	require.Empty(t, buf.String())
}
