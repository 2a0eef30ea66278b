package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// NewAPIKey returns a fresh API key: 256 random bits, URL-safe.
func NewAPIKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "pd_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// HashAPIKey is how an API key is stored: its SHA-256. Keys are 256-bit
// random values, so a slow password hash would add cost and no safety.
func HashAPIKey(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

// lookupUser resolves an API key to its user id, through the cache.
func (s *Server) lookupUser(ctx context.Context, key string) (int64, error) {
	hash := sha256.Sum256([]byte(key))
	now := time.Now()
	if id, ok := s.auth.get(hash, now); ok {
		return id, nil
	}
	user, err := s.queries.UserGetByAPIKeyHash(ctx, s.pool, hash[:])
	if err != nil {
		return 0, err
	}
	s.auth.put(hash, user.ID, now)
	return user.ID, nil
}

// authenticate resolves the bearer API key to its user.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const prefix = "bearer "
		h := r.Header.Get("Authorization")
		if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="paymentsd"`)
			writeProblem(w, problem.New(problem.Unauthorized, "Send your API key as Authorization: Bearer <key>."))
			return
		}
		id, err := s.lookupUser(r.Context(), strings.TrimSpace(h[len(prefix):]))
		if err != nil {
			if errors.Is(err, db.ErrNotFound) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="paymentsd", error="invalid_token"`)
				writeProblem(w, problem.New(problem.Unauthorized, "The API key is not valid."))
				return
			}
			writeError(w, r, err)
			return
		}
		logField(r, func(c zerolog.Context) zerolog.Context { return c.Int64("user_id", id) })
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, id)))
	})
}
