package idempotency

import "crypto/sha256"

// DigestSize is the length of a Digest: 128 bits, more than enough to tell
// the requests sent under one key apart.
const DigestSize = 16

// Digest identifies a request as its client sent it, byte for byte: the
// first DigestSize bytes of the SHA-256 of its method, path and raw body,
// separated by line breaks. A key stores the digest of the request that
// made it, so that a retry of that very request, which is what a client
// sends, is known by its bytes alone, without its body being decoded,
// canonicalized and fingerprinted.
//
// Two digests that differ prove nothing: one request may be written in many
// ways (member order, white space, escapes), and a null member and a member
// left out are one request. The Fingerprint judges those. Only equal
// digests decide, and they decide what the fingerprint would: the same
// bytes decode to the same request.
func Digest(method, path string, body []byte) []byte {
	var buf [512]byte // on the stack for any request this service serves
	b := append(append(append(append(append(buf[:0], method...), '\n'), path...), '\n'), body...)
	sum := sha256.Sum256(b)
	return append(make([]byte, 0, DigestSize), sum[:DigestSize]...)
}
