package cli

import (
	"io"

	"github.com/rs/zerolog"
)

// newTestLogger is the service's logger shape, writing JSON to w.
func newTestLogger(w io.Writer) zerolog.Logger {
	return zerolog.New(w).With().Timestamp().Logger()
}
