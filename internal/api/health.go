package api

import (
	"context"
	"net/http"
	"time"

	"github.com/paymentsd/paymentsd/internal/problem"
)

// healthz says the process is up; it touches nothing else.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz says whether the process can serve: the store answers.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		writeRetryable(w, problem.New(problem.StoreUnavailable, "The database does not answer."), retryStore)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
