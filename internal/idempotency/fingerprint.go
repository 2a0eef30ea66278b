package idempotency

import (
	"crypto/sha256"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Fingerprint identifies a request independently of how its JSON body was
// written: the body is put into RFC 8785 (JCS) canonical form — members
// sorted, numbers and strings in one spelling, no white space — and the
// fingerprint is the SHA-256 of the method, the path and that canonical body,
// separated by line breaks (neither a method nor a path can hold one).
//
// Fingerprint compares JSON values, not requests: body should be the request
// as its endpoint decoded it (json.Marshal of payments.Params, say), so that
// what the endpoint reads as one request — a null optional member and the
// member left out — is one fingerprint.
//
// It returns the canonical body too, which is what the key row stores.
func Fingerprint(method, path string, body []byte) (canonical, sum []byte, err error) {
	canonical, err = jcs.Transform(body)
	if err != nil {
		return nil, nil, fmt.Errorf("error canonicalizing request body: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(method + "\n" + path + "\n"))
	h.Write(canonical)
	return canonical, h.Sum(nil), nil
}
