package logging

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

func init() {
	// Every Dur field, whoever writes it, carries its unit: "1m30s".
	zerolog.DurationFieldFormat = zerolog.DurationFormatString
}

// LevelEnv is the variable that sets the level.
const LevelEnv = "PAYMENTSD_LOG_LEVEL"

// Levels are the values LevelEnv accepts, quietest last.
var Levels = []string{"trace", "debug", "info", "warn", "error"}

// ParseLevel reads a level as LevelEnv gives it; empty means info.
func ParseLevel(s string) (zerolog.Level, error) {
	if s == "" {
		return zerolog.InfoLevel, nil
	}
	for _, l := range Levels {
		if s == l {
			return zerolog.ParseLevel(s)
		}
	}
	return zerolog.NoLevel, fmt.Errorf("%s must be one of %s (or unset for info), got %q", LevelEnv, strings.Join(Levels, ", "), s)
}

// New returns the logger of a paymentsd process writing to w, at the level
// that LevelEnv names: JSON lines, or readable lines when w is a terminal.
func New(w io.Writer) (zerolog.Logger, error) {
	level, err := ParseLevel(os.Getenv(LevelEnv))
	if err != nil {
		return zerolog.Nop(), err
	}
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000"}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}
