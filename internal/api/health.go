package api

import (
	"context"
	"net/http"
	"time"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// healthz says the process is up; it touches nothing else.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz says whether the process can serve: the store answers, commits
// (the instance's heartbeat keeps committing), and its schema is the one
// this binary was built for.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	current, err := db.SchemaCurrent(ctx, s.pool)
	if err == nil && s.cfg.Alive != nil {
		if why := s.cfg.Alive(); why != nil {
			writeRetryable(w, problem.New(problem.StoreUnavailable, "The database does not commit: "+why.Error()+"."), retryStore)
			return
		}
	}
	switch {
	case err != nil:
		writeRetryable(w, problem.New(problem.StoreUnavailable, "The database does not answer."), retryStore)
	case !current:
		writeRetryable(w, problem.New(problem.MigrationsPending,
			"The database schema is behind this binary: run `paymentsd migrate`."), retryStore)
	default:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	}
}
