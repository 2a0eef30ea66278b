package stripefake

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stripe/stripe-go/v79/webhook"
)

// The webhook sender: a bounded queue, workers that deliver events in the
// order they were made, the faults chaos draws, and retries until 2xx.

// delivery is one event on its way.
type delivery struct {
	ev      *Event // guarded by Server.mu
	payload []byte
	plan    webhookPlan
	due     time.Time // made + Options.WebhookLatency, by the real clock
}

// webhookSender delivers the events of one Server.
type webhookSender struct {
	s          *Server
	urls       []string
	secret     string
	client     *http.Client
	latency    time.Duration
	backoff    time.Duration
	maxBackoff time.Duration
	capacity   int64
	queue      chan *delivery
	next       atomic.Uint64 // round robin over urls

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	closed bool // guarded by Server.mu: no more events are queued

	heldMu sync.Mutex
	held   []*delivery // reordered events waiting for a later one
}

// newWebhookSender starts the workers that deliver s's events.
func newWebhookSender(s *Server, opts Options) *webhookSender {
	var urls []string
	for _, u := range strings.Split(opts.WebhookURL, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	h := &webhookSender{
		s:          s,
		urls:       urls,
		secret:     opts.WebhookSecret,
		latency:    max(opts.WebhookLatency, 0),
		backoff:    opts.WebhookBackoff,
		maxBackoff: opts.WebhookMaxBackoff,
		capacity:   int64(opts.WebhookQueue),
	}
	if h.backoff <= 0 {
		h.backoff = defaultWebhookBackoff
	}
	if h.maxBackoff <= 0 {
		h.maxBackoff = defaultWebhookMaxBackoff
	}
	h.maxBackoff = max(h.maxBackoff, h.backoff)
	if h.capacity <= 0 {
		h.capacity = defaultWebhookQueue
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 4 * webhookWorkers
	h.client = &http.Client{Timeout: webhookTimeout, Transport: transport}
	// Pending events never exceed the capacity, so a send never blocks.
	h.queue = make(chan *delivery, h.capacity)
	h.ctx, h.cancel = context.WithCancel(context.Background())
	for range webhookWorkers {
		h.wg.Add(1)
		go h.work()
	}
	return h
}

// work makes first attempts, in queue order, until the sender is closed.
func (h *webhookSender) work() {
	defer h.wg.Done()
	for {
		select {
		case <-h.ctx.Done():
			return
		case d := <-h.queue:
			h.dispatch(d)
		}
	}
}

// dispatch starts the deliveries of d as its plan says, once it is due.
// Events held back (reordered) before it are released once its first
// attempt went out.
func (h *webhookSender) dispatch(d *delivery) {
	if wait := time.Until(d.due); wait > 0 {
		// Events are due in queue order: waiting here keeps that order.
		t := time.NewTimer(wait)
		select {
		case <-h.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	if d.plan.reorder {
		h.hold(d)
		return
	}
	h.heldMu.Lock()
	held := h.held
	h.held = nil
	h.heldMu.Unlock()
	if d.plan.delay > 0 {
		h.after(d.plan.delay, func() {
			h.first(d)
			h.release(held)
		})
		return
	}
	h.first(d)
	h.release(held)
}

// hold keeps d back until a later event's first attempt went out, or for
// reorderHold at most.
func (h *webhookSender) hold(d *delivery) {
	h.heldMu.Lock()
	h.held = append(h.held, d)
	h.heldMu.Unlock()
	h.after(reorderHold, func() {
		h.heldMu.Lock()
		i := -1
		for j, x := range h.held {
			if x == d {
				i = j
			}
		}
		if i >= 0 {
			h.held = append(h.held[:i], h.held[i+1:]...)
		}
		h.heldMu.Unlock()
		if i >= 0 {
			h.first(d)
		}
	})
}

// release starts the first attempts of held events, after their delays.
func (h *webhookSender) release(held []*delivery) {
	for _, d := range held {
		h.after(d.plan.delay, func() { h.first(d) })
	}
}

// after runs f in its own goroutine after delay, unless the sender is
// closed first.
func (h *webhookSender) after(delay time.Duration, f func()) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		if delay > 0 {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-h.ctx.Done():
				return
			case <-t.C:
			}
		}
		if h.ctx.Err() == nil {
			f()
		}
	}()
}

// first makes d's first attempt (with a concurrent duplicate if planned),
// and hands a failed one over to retries.
func (h *webhookSender) first(d *delivery) {
	if d.plan.duplicate && d.plan.concurrent {
		h.after(0, func() { h.attempt(d, attemptDuplicate) })
	}
	if h.attempt(d, attemptFirst) {
		h.delivered(d)
		return
	}
	h.after(0, func() { h.retry(d) })
}

// retry retries d with exponential backoff until it is delivered (by this
// or a concurrent duplicate attempt) or the sender is closed.
func (h *webhookSender) retry(d *delivery) {
	wait := h.backoff
	for {
		t := time.NewTimer(wait)
		select {
		case <-h.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if h.isDelivered(d) {
			return
		}
		if h.attempt(d, attemptRetry) {
			h.delivered(d)
			return
		}
		wait = min(2*wait, h.maxBackoff)
	}
}

// delivered follows a first 2xx answer: a planned sequential duplicate
// goes now.
func (h *webhookSender) delivered(d *delivery) {
	if d.plan.duplicate && !d.plan.concurrent {
		h.after(0, func() { h.attempt(d, attemptDuplicate) })
	}
}

// isDelivered reports whether an attempt of d was answered 2xx.
func (h *webhookSender) isDelivered(d *delivery) bool {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return d.ev.Status == EventDelivered
}

// attemptKind is why an attempt is made.
type attemptKind int

const (
	attemptFirst attemptKind = iota
	attemptRetry
	attemptDuplicate
)

// attempt POSTs d once to the next URL, signed now, and records the
// result. It reports whether the endpoint answered 2xx. A planned lost
// first attempt is recorded as failed without being sent.
func (h *webhookSender) attempt(d *delivery, kind attemptKind) bool {
	if kind == attemptFirst && d.plan.lost {
		h.record(d, kind, 0, "dropped by chaos (p_webhook_lost): the first attempt never reached the endpoint")
		return false
	}
	url := h.urls[(h.next.Add(1)-1)%uint64(len(h.urls))]
	req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, url, bytes.NewReader(d.payload))
	if err != nil {
		h.record(d, kind, 0, err.Error())
		return false
	}
	now := time.Now()
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	req.Header.Set("Stripe-Signature", "t="+strconv.FormatInt(now.Unix(), 10)+",v1="+
		hex.EncodeToString(webhook.ComputeSignature(now, d.payload, h.secret)))
	resp, err := h.client.Do(req)
	if err != nil {
		if h.ctx.Err() != nil {
			return false // closed: not an answer of the endpoint
		}
		h.record(d, kind, 0, err.Error())
		return false
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		h.record(d, kind, resp.StatusCode, strings.TrimSpace(resp.Status+" "+string(body)))
		return false
	}
	h.record(d, kind, resp.StatusCode, "")
	return true
}

// record counts one attempt of d: answered 2xx when failure is empty.
func (h *webhookSender) record(d *delivery, kind attemptKind, status int, failure string) {
	s := h.s
	s.mu.Lock()
	ev := d.ev
	ev.Attempts++
	s.stats.WebhookAttempts++
	if kind == attemptRetry {
		s.stats.WebhookRetries++
	}
	first := false
	if failure == "" {
		ev.Answered++
		s.stats.WebhookAnswered++
		if ev.Status == EventPending {
			first = true
			at := s.now()
			ev.Status, ev.DeliveredAt = EventDelivered, &at
			s.stats.WebhookDelivered++
			s.stats.WebhookPending--
		}
	} else {
		ev.LastError = failure
		s.stats.WebhookFailedAttempts++
	}
	attempts := ev.Attempts
	s.mu.Unlock()

	if failure != "" {
		s.log.Info().Str("event_id", ev.ID).Str("event_type", ev.Type).Int("attempt", attempts).
			Int("status", status).Str("error", failure).Msg("stripefake: webhook attempt failed")
		return
	}
	s.log.Debug().Str("event_id", ev.ID).Str("event_type", ev.Type).Int("attempt", attempts).
		Int("status", status).Bool("first_delivery", first).Msg("stripefake: webhook delivered")
}
