package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/metrics"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// BenchmarkHTTPLayer measures the HTTP layer alone, in process and without
// a database: the access log and metrics, routing, the panic guard, and,
// for an idempotent endpoint, authentication from the cache, the key and
// the media type, refused before the engine. The API benchmarks measure a
// whole request over the network, where a few hundred nanoseconds are lost
// in the noise.
func BenchmarkHTTPLayer(b *testing.B) {
	flow := phases.Flow[struct{}]{Name: "bench", Steps: []phases.Step[struct{}]{
		phases.Local(phases.Started, func(context.Context, db.Tx, *phases.Run, *struct{}) (phases.Transition, error) {
			return phases.FinishWith(&phases.Response{Status: http.StatusCreated}), nil
		}),
	}}
	endpoint := Endpoint{Method: http.MethodPost, Pattern: "/things", Noun: "thing", Flow: flow,
		Decode: func([]byte, func(string) string) ([]byte, []problem.FieldError) { return []byte("{}"), nil }}
	s, err := NewServer(nil, phases.New(nil, phases.Config{}), metrics.New(nil, time.Minute),
		zerolog.New(io.Discard).Level(zerolog.InfoLevel), Config{AuthCacheTTL: time.Hour}, endpoint)
	if err != nil {
		b.Fatal(err)
	}
	const apiKey = "pd_benchmark"
	s.auth.put([32]byte(HashAPIKey(apiKey)), 1, time.Now())
	h := s.Handler()

	serve := func(b *testing.B, method, path string, header http.Header, status int) {
		r := httptest.NewRequest(method, path, http.NoBody) // neither request reads its body
		r.Header = header
		w := &discardWriter{}
		b.ReportAllocs()
		for b.Loop() {
			clear(w.header)
			w.status = 0
			h.ServeHTTP(w, r)
			if w.status != status {
				b.Fatalf("status %d", w.status)
			}
		}
	}
	b.Run("healthz", func(b *testing.B) {
		serve(b, http.MethodGet, "/healthz", http.Header{}, http.StatusOK)
	})
	b.Run("idempotent", func(b *testing.B) {
		header := http.Header{
			"Authorization":   {"Bearer " + apiKey},
			"Idempotency-Key": {"k1"},
			"Content-Type":    {"text/plain"},
		}
		serve(b, http.MethodPost, "/things", header, http.StatusUnsupportedMediaType)
	})
}

// discardWriter is a ResponseWriter that keeps the status only.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header {
	if w.header == nil {
		w.header = http.Header{}
	}
	return w.header
}

func (w *discardWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *discardWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}
