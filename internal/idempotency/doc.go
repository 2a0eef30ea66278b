// Package idempotency reads the Idempotency-Key header and computes the
// fingerprint that tells a retry of a request from a different request sent
// under the same key.
package idempotency
