package stripefake

import (
	"encoding/json"
	"time"

	"github.com/stripe/stripe-go/v79"
)

// Webhooks. With Options.WebhookURL the emulator makes a Stripe event for
// every state change it makes, at the time of the change (by the server's
// clock, see clock.go, under the lock that makes the change):
//
//   - a PaymentIntent created: payment_intent.created, then
//     payment_intent.succeeded or, for a decline, payment_intent.payment_failed,
//     or for pm_card_processing payment_intent.processing;
//   - a processing PaymentIntent moved on (SetPaymentIntentStatus):
//     payment_intent.succeeded or payment_intent.payment_failed (or
//     payment_intent.amount_capturable_updated with manual capture);
//   - with capture_method=manual, a PaymentIntent authorized:
//     payment_intent.amount_capturable_updated (after
//     payment_intent.created); captured: payment_intent.succeeded;
//   - a PaymentIntent canceled: payment_intent.canceled, by the cancel
//     request or, for an authorization not captured in time, by the
//     emulator (no request);
//   - a refund created: refund.created (with the status its create answer
//     shows), and refund.updated for every later change of its status
//     (SetRefundStatus, or a refund of pm_card_refundFail failing), with
//     data.previous_attributes (see previous.go);
//   - a dispute opened (OpenDispute): charge.dispute.created.
//
// The event is Stripe's: {"id":"evt_...","object":"event","api_version":...,
// "created":...,"type":...,"livemode":false,"pending_webhooks":1,
// "request":{...},"data":{"object":...}}, the object rendered as the API
// renders it (latest_charge not expanded). Each delivery attempt is a POST
// signed as Stripe signs: "Stripe-Signature: t=<now>,v1=<hex HMAC-SHA256 of
// "<t>.<body>" keyed with the secret>", a fresh timestamp per attempt.
//
// Delivery is asynchronous, never on the request's path: events wait in a
// bounded queue (Options.WebhookQueue), a few workers make first attempts in
// the order the events were made, each Options.WebhookLatency after its
// change at the earliest, and an attempt not answered 2xx within
// 10 s is retried with exponential backoff (Options.WebhookBackoff up to
// WebhookMaxBackoff) until it is answered or the server is closed. Several
// URLs are taken in turn, one per attempt. Chaos adds the faults Stripe
// documents of its deliveries (Chaos.PWebhookDelay and the rest): late,
// twice (sometimes at once), out of order, and a first attempt lost.

const (
	defaultWebhookBackoff    = 500 * time.Millisecond
	defaultWebhookMaxBackoff = 10 * time.Second
	defaultWebhookQueue      = 10000
	// webhookWorkers make the first attempts, in the order of the queue.
	webhookWorkers = 4
	// webhookTimeout bounds one attempt, as Stripe's own timeout does.
	webhookTimeout = 10 * time.Second
	// reorderHold bounds how long a reordered event waits for a later one.
	reorderHold = 2 * time.Second
)

// Event statuses.
const (
	// EventPending: not answered 2xx yet; it is being retried.
	EventPending = "pending"
	// EventDelivered: an attempt was answered 2xx.
	EventDelivered = "delivered"
	// EventDropped: never sent, because the queue was full.
	EventDropped = "dropped"
)

// Event is one event the emulator made, and what became of its deliveries.
type Event struct {
	// ID is "evt_" followed by 24 random alphanumerics.
	ID string `json:"id"`
	// Type is Stripe's event type, e.g. "payment_intent.succeeded".
	Type string `json:"type"`
	// ObjectID is the id of the object in data.object.
	ObjectID string `json:"object_id"`
	// Created is the time of the change, truncated to seconds.
	Created time.Time `json:"created"`
	// Payload is the event exactly as every delivery sends it.
	Payload json.RawMessage `json:"payload"`
	// Status is EventPending, EventDelivered or EventDropped.
	Status string `json:"status"`
	// Attempts counts delivery attempts, retries and duplicates included.
	Attempts int `json:"attempts"`
	// Answered counts attempts answered 2xx; above 1 the endpoint got
	// duplicates.
	Answered int `json:"answered"`
	// DeliveredAt is when the first 2xx answer came.
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	// LastError says why the last failed attempt failed.
	LastError string `json:"last_error,omitempty"`
	// Faults names the chaos faults drawn for the event: "delay",
	// "duplicate", "reorder", "lost".
	Faults []string `json:"faults,omitempty"`
}

// eventJSON is Stripe's wire form of an event.
type eventJSON struct {
	ID              string       `json:"id"`
	Object          string       `json:"object"`
	APIVersion      string       `json:"api_version"`
	Created         int64        `json:"created"`
	Data            eventData    `json:"data"`
	Livemode        bool         `json:"livemode"`
	PendingWebhooks int          `json:"pending_webhooks"`
	Request         eventRequest `json:"request"`
	Type            string       `json:"type"`
}

// eventData holds the object of an event and, for *.updated events, the
// previous values of the attributes that changed (see previousAttributes).
type eventData struct {
	Object             any            `json:"object"`
	PreviousAttributes map[string]any `json:"previous_attributes,omitempty"`
}

// eventRequest names the API request that caused an event; both are null
// for changes no request made (a refund settling, a dispute).
type eventRequest struct {
	ID             *string `json:"id"`
	IdempotencyKey *string `json:"idempotency_key"`
}

// requestOf is the eventRequest of the request reqID with key key.
func requestOf(reqID, key string) eventRequest {
	return eventRequest{ID: optional(reqID), IdempotencyKey: optional(key)}
}

// webhookPlan is what chaos does to the deliveries of one event.
type webhookPlan struct {
	delay      time.Duration
	duplicate  bool
	concurrent bool // the duplicate goes at once with the first attempt
	reorder    bool
	lost       bool
}

// names lists the plan's faults, for Event.Faults.
func (p webhookPlan) names() []string {
	var out []string
	if p.delay > 0 {
		out = append(out, "delay")
	}
	if p.duplicate {
		out = append(out, "duplicate")
	}
	if p.reorder {
		out = append(out, "reorder")
	}
	if p.lost {
		out = append(out, "lost")
	}
	return out
}

// Close stops delivering events: attempts in flight are cut short, and
// events not delivered yet stay pending. It also stops the timer that
// cancels authorizations at the end of their window (from then on they are
// canceled only when a request or a call comes). Serve calls it when it
// returns. It is safe to call more than once.
func (s *Server) Close() {
	s.stopExpiryTimer()
	h := s.hooks
	if h == nil {
		return
	}
	h.once.Do(func() {
		s.mu.Lock()
		h.closed = true
		s.mu.Unlock()
		h.cancel()
		h.wg.Wait()
		h.client.CloseIdleConnections()
	})
}

// Events returns a snapshot of every event made, in the order they were
// made.
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireDueLocked()
	out := make([]Event, len(s.events))
	for i, ev := range s.events {
		out[i] = *ev
	}
	return out
}

// emitIntentLocked makes the events of a PaymentIntent just created by the
// request reqID: payment_intent.created, then, once it was confirmed,
// payment_intent.succeeded, payment_intent.amount_capturable_updated
// (authorized, capture_method=manual), payment_intent.processing or
// payment_intent.payment_failed. The caller holds s.mu.
func (s *Server) emitIntentLocked(pi PaymentIntent, reqID, idempotencyKey string) {
	if s.hooks == nil {
		return
	}
	req := requestOf(reqID, idempotencyKey)
	s.emitLocked("payment_intent.created", pi.ID, pi.wire(), req)
	switch {
	case pi.Status == StatusSucceeded:
		s.emitLocked("payment_intent.succeeded", pi.ID, pi.wire(), req)
	case pi.Status == StatusRequiresCapture:
		s.emitLocked("payment_intent.amount_capturable_updated", pi.ID, pi.wire(), req)
	case pi.Status == StatusProcessing:
		s.emitLocked("payment_intent.processing", pi.ID, pi.wire(), req)
	case pi.DeclineCode != "":
		s.emitLocked("payment_intent.payment_failed", pi.ID, pi.wire(), req)
	}
}

// emitRefundUpdatedLocked makes the refund.updated event of refund i, which
// was before (its wire form) until the change just made. The caller holds
// s.mu.
func (s *Server) emitRefundUpdatedLocked(i int, before *refundJSON) {
	if s.hooks == nil {
		return
	}
	rf := s.refunds[i]
	after := rf.wire()
	data := eventData{Object: after, PreviousAttributes: previousAttributes(before, after)}
	s.emitDataLocked("refund.updated", rf.ID, data, eventRequest{})
}

// emitRefundLocked makes an event of type typ about refund i (its state
// now). The caller holds s.mu.
func (s *Server) emitRefundLocked(typ string, i int, req eventRequest) {
	if s.hooks == nil {
		return
	}
	rf := s.refunds[i]
	s.emitLocked(typ, rf.ID, rf.wire(), req)
}

// emitLocked makes an event of type typ about object (its wire form, whose
// id is objectID), records it and queues it for delivery. The caller holds
// s.mu. Without webhooks it does nothing.
func (s *Server) emitLocked(typ, objectID string, object any, req eventRequest) {
	s.emitDataLocked(typ, objectID, eventData{Object: object}, req)
}

// emitDataLocked is emitLocked with the event's whole data. The caller holds
// s.mu.
func (s *Server) emitDataLocked(typ, objectID string, data eventData, req eventRequest) {
	h := s.hooks
	if h == nil {
		return
	}
	now := s.now()
	id := "evt_" + randomID(24)
	payload := marshalWire(eventJSON{
		ID: id, Object: "event", APIVersion: stripe.APIVersion, Created: now.Unix(),
		Data: data, PendingWebhooks: 1, Request: req, Type: typ,
	})
	plan := s.drawWebhookPlanLocked()
	ev := &Event{
		ID: id, Type: typ, ObjectID: objectID, Created: time.Unix(now.Unix(), 0).UTC(),
		Payload: payload, Status: EventPending, Faults: plan.names(),
	}
	s.events = append(s.events, ev)
	s.stats.WebhookEvents++
	switch {
	case h.closed:
		// Stopped: the event stays pending, as it would at Stripe until
		// the endpoint is enabled again.
		return
	case s.stats.WebhookPending >= h.capacity:
		ev.Status = EventDropped
		s.stats.WebhookDropped++
		s.log.Warn().Str("event_id", id).Str("event_type", typ).Int64("queue", h.capacity).
			Msg("stripefake: webhook queue full; event dropped")
		return
	}
	s.stats.WebhookPending++
	h.queue <- &delivery{ev: ev, payload: payload, plan: plan, due: time.Now().Add(h.latency)}
}

// drawWebhookPlanLocked draws the chaos faults of one event. The caller
// holds s.mu.
func (s *Server) drawWebhookPlanLocked() webhookPlan {
	c, rng := s.chaos, s.hookRng
	var p webhookPlan
	if c.PWebhookDelay > 0 && c.WebhookDelay > 0 && rng.Float64() < c.PWebhookDelay {
		p.delay = 1 + time.Duration(rng.Int64N(int64(c.WebhookDelay)))
		s.stats.WebhookDelays++
	}
	if c.PWebhookDuplicate > 0 && rng.Float64() < c.PWebhookDuplicate {
		p.duplicate, p.concurrent = true, rng.IntN(2) == 0
		s.stats.WebhookDuplicates++
	}
	if c.PWebhookReorder > 0 && rng.Float64() < c.PWebhookReorder {
		p.reorder = true
		s.stats.WebhookReorders++
	}
	if c.PWebhookLost > 0 && rng.Float64() < c.PWebhookLost {
		p.lost = true
		s.stats.WebhookLost++
	}
	return p
}
