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

// CompleterLease names the worker lease a completer run holds.
const CompleterLease = completerLease

// RunLeased runs f while holding the worker lease name (runLeased).
var RunLeased = runLeased
