package stripefake

// CreateTraffic creates n succeeded PaymentIntents of 10.00 USD with no
// metadata, stamped by the server's clock: an account's other traffic, for
// a test that needs a busy account (a list by creation time too long to
// page) without paying for n HTTP requests. Each is made as a create
// request would make it, events included, but without an idempotency key.
func (s *Server) CreateTraffic(n int) {
	p := createParams{amount: 1000, currency: "usd", paymentMethod: "pm_card_visa", captureMethod: captureAutomaticAsync, confirm: true}
	for range n {
		reqID := "req_" + randomID(14)
		s.createIntent(p, reqID, "")
	}
}
