package workers

import (
	"context"

	"github.com/paymentsd/paymentsd/internal/phases"
)

// SetResumeKey replaces how w resumes one key, for tests that make a resume
// panic or block.
func SetResumeKey(w *CompleterWorker, f func(ctx context.Context, keyID int64) (*phases.Result, error)) {
	w.resumeKey = f
}

// CompleterLock is the advisory lock key a completer run holds.
var CompleterLock = completerLock
