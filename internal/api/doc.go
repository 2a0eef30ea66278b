// Package api is paymentsd's HTTP layer: the chi router, authentication, the
// handlers, and the problem responses. Handlers decide everything that can
// be decided without the store (authentication aside) before an idempotency
// key is reserved, so a refused request leaves nothing behind.
package api
