package idempotency

import "crypto/sha256"

// DigestSize is the length of a Digest: 128 bits, more than enough to tell
// the requests sent under one key apart.
const DigestSize = 16

// Digest identifies a request as its client sent it: the first DigestSize
// bytes of the SHA-256 of its method, its path as sent (still escaped, as
// the router reads it: url.URL.EscapedPath) and its raw body, separated by
// line breaks. A key stores the digest of the request that made it, so that
// a retry of that very request, which is what a client sends, is known by
// its bytes alone, without its body being decoded, canonicalized and
// fingerprinted.
//
// Two digests that differ prove nothing: one request may be written in many
// ways (member order, white space, escapes, /payments/%31 for /payments/1),
// and a null member and a member left out are one request. The Fingerprint
// judges those. Only equal digests decide, and they decide what the
// fingerprint would, as long as an endpoint's decoding reads nothing but
// the body and the path values routed from this path.
func Digest(method, escapedPath string, body []byte) []byte {
	var sum [sha256.Size]byte
	if n := len(method) + len(escapedPath) + 2 + len(body); n <= 1024 {
		var buf [1024]byte // an ordinary request, hashed from the stack
		b := append(append(append(append(append(buf[:0], method...), '\n'), escapedPath...), '\n'), body...)
		sum = sha256.Sum256(b)
	} else {
		h := sha256.New()
		h.Write([]byte(method + "\n" + escapedPath + "\n"))
		h.Write(body)
		h.Sum(sum[:0])
	}
	return append(make([]byte, 0, DigestSize), sum[:DigestSize]...)
}
