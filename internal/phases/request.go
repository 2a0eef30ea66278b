package phases

import (
	"bytes"
	"context"
	"time"
)

// Request is one idempotent request as the engine sees it.
type Request struct {
	UserID int64
	Key    string
	// Flow names the registered flow that serves the request.
	Flow string
	// Method and Path are the request's own (path values included), kept
	// for the operator.
	Method string
	Path   string
	// Params is the canonical request body, stored so that any process can
	// resume the request without the client.
	Params []byte
	// Fingerprint identifies the request (method, path, body); a key reused
	// with another fingerprint is refused.
	Fingerprint []byte
	// Digest, when set, identifies the request as sent (idempotency.Digest),
	// and a key it creates stores it. A request that carries its key's
	// digest sent what the request that made the key sent: Execute answers
	// it without Params and Fingerprint.
	Digest []byte
	// Prepare, when set, fills in Params and Fingerprint, and Execute calls
	// it once, when it first needs them: the key does not exist, or was
	// made by a request with another digest. So the replay of a request as
	// it was first sent never decodes its body. Its error is Execute's.
	Prepare func(*Request) error
	// Admit, when set, may refuse the request before its key is created
	// (a resource the caller may not act on, say); its error is Execute's.
	// It is asked only when the key does not exist: a key that exists was
	// admitted when it was created, so a replay costs no check.
	Admit func(ctx context.Context) error
	// RunTimeout, when set, detaches a run from the caller's cancellation
	// once it reserves or resumes the key, and bounds it instead: a client
	// that hangs up must not leave its key half-run. Answering from a
	// finished key (a replay) keeps the caller's context, and costs no
	// timer.
	RunTimeout time.Duration

	// prepared is set once Prepare has filled in Params and Fingerprint.
	prepared bool
}

// Result is the answer to a request.
type Result struct {
	Response *Response
	// Replayed is true when Response was stored by an earlier run.
	Replayed bool
}

// prepare fills in the request's Params and Fingerprint, once.
func (req *Request) prepare() error {
	if req.prepared || req.Prepare == nil {
		return nil
	}
	if err := req.Prepare(req); err != nil {
		return err
	}
	req.prepared = true
	return nil
}

// madeKey reports whether req is the request that made key: by its digest
// when that is the key's, otherwise by its fingerprint, which covers the
// request as decoded.
func (req *Request) madeKey(key *keyState) (bool, error) {
	if key.SameDigest {
		return true, nil
	}
	if err := req.prepare(); err != nil {
		return false, err
	}
	return bytes.Equal(key.RequestFingerprint, req.Fingerprint), nil
}
