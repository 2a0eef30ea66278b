package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
)

// User is one line of `paymentsd users create`.
type User struct {
	ID     int64  `json:"user_id"`
	Email  string `json:"email"`
	APIKey string `json:"api_key"`
}

// ReadUsers reads a file of `paymentsd users create` output lines. The
// pgbench scripts pick users from an id range, so the ids must be
// consecutive, as they are in a fresh database.
func ReadUsers(path string) ([]User, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var users []User
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var u User
		if err := json.Unmarshal(sc.Bytes(), &u); err != nil || u.APIKey == "" {
			return nil, fmt.Errorf("%s: not a `paymentsd users create` line: %q", path, sc.Text())
		}
		users = append(users, u)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("%s: no users", path)
	}
	for i, u := range users {
		if u.ID != users[0].ID+int64(i) {
			return nil, fmt.Errorf("%s: user ids are not consecutive (%d after %d)", path, u.ID, users[0].ID)
		}
	}
	return users, nil
}

// paymentBody is the request every scenario sends.
var paymentBody = []byte(`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`)

// emulatorBody is the same charge, as stripe-go would send it to Stripe.
var emulatorBody = []byte("amount=2000&currency=usd&payment_method=pm_card_visa&confirm=true")

// paymentRequest is POST /payments for user with idempotency key.
func paymentRequest(base string, user User, key string) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/payments", bytes.NewReader(paymentBody))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+user.APIKey)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// created accepts a 201, the answer to a new payment.
func created(resp *http.Response) bool { return resp.StatusCode == http.StatusCreated }

// replayed accepts a 201 marked as a replay.
func replayed(resp *http.Response) bool {
	return resp.StatusCode == http.StatusCreated && resp.Header.Get("Idempotent-Replayed") == "true"
}

// FreshScenario posts new payments: every request has a key never used
// before, a random UUIDv4 as clients send them, so that the key's insert
// lands on a random page of the unique index (and of the tombstones'), as
// it does in production; worker w sends as user w modulo the number of
// users.
func FreshScenario(name, base string, users []User) Scenario {
	return Scenario{
		Name: name,
		Request: func(w, seq int) (*http.Request, error) {
			return paymentRequest(base, users[w%len(users)], RandomKey())
		},
		Accept: created,
	}
}

// RandomKey is a random UUIDv4 in its canonical text form. It comes from
// math/rand/v2's generator, which is cheap and needs no lock: a load
// generator's key needs to be unique and evenly spread, not unguessable.
func RandomKey() string {
	var u uuid.UUID
	a, b := rand.Uint64(), rand.Uint64()
	for i := range 8 {
		u[i], u[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	return u.String()
}

// The replay keys of the service and of the bare service: the i-th
// finished key of every user is prefix + i. Each has its own, in the same
// database under the same users; replay.sql looks up the service's.
const (
	ServiceReplayPrefix = "replay-"
	BareReplayPrefix    = "bare-replay-"
	// LeastReplayPrefix is the least-SQL bare service's, in its own
	// schema; least_replay.sql looks them up.
	LeastReplayPrefix = "least-replay-"
)

// ReplayScenario posts the requests PrepareReplays finished under prefix,
// cycling through every user and key.
func ReplayScenario(name, base string, users []User, keys int, prefix string) Scenario {
	return Scenario{
		Name: name,
		Request: func(w, seq int) (*http.Request, error) {
			n := w*7919 + seq
			return paymentRequest(base, users[n%len(users)], prefix+strconv.Itoa(n/len(users)%keys))
		},
		Accept: replayed,
	}
}

// FilledReplayScenario posts the requests of keys a fill finished
// (FilledRequests) again, each to its own path (payments and refunds) with
// its own body and user, cycling through them; worker w starts its own
// stretch of them, so that the lookups spread over the whole index rather
// than a few hot pages. Each must answer its stored status (201, or 402 for
// a declined payment) marked as a replay.
func FilledReplayScenario(name, base string, reqs []FilledRequest) Scenario {
	status := make(map[string]int, len(reqs))
	for _, r := range reqs {
		status[r.Key] = r.Status
	}
	return Scenario{
		Name: name,
		Request: func(w, seq int) (*http.Request, error) {
			r := reqs[(w*7919+seq)%len(reqs)]
			req, err := http.NewRequest(http.MethodPost, base+r.Path, bytes.NewReader(r.Body))
			if err != nil {
				return nil, err
			}
			req.Header.Set("Authorization", "Bearer "+r.User.APIKey)
			req.Header.Set("Idempotency-Key", r.Key)
			req.Header.Set("Content-Type", "application/json")
			return req, nil
		},
		Answer: func(code int) bool { return code == http.StatusCreated || code == http.StatusPaymentRequired },
		Accept: func(resp *http.Response) bool {
			want, ok := status[resp.Request.Header.Get("Idempotency-Key")]
			return ok && resp.StatusCode == want && resp.Header.Get("Idempotent-Replayed") == "true"
		},
	}
}

// EmulatorScenario creates and confirms PaymentIntents on the Stripe
// emulator directly, each under a new Stripe idempotency key as the service
// sends them: the cost of the foreign call inside every fresh payment.
func EmulatorScenario(base, run string) Scenario {
	return Scenario{
		Name: "emulator",
		Request: func(w, seq int) (*http.Request, error) {
			req, err := http.NewRequest(http.MethodPost, base+"/v1/payment_intents", bytes.NewReader(emulatorBody))
			if err != nil {
				return nil, err
			}
			req.Header.Set("Authorization", "Bearer sk_test_x")
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Idempotency-Key", run+"-w"+strconv.Itoa(w)+"-"+strconv.Itoa(seq))
			return req, nil
		},
	}
}

// PrepareReplays finishes keys prefix0 … prefix<keys-1> for every user
// through the service at base, a few at a time, and checks that one replays.
func PrepareReplays(ctx context.Context, base string, users []User, keys int, prefix string) error {
	client := &http.Client{Timeout: 30 * time.Second}
	type job struct {
		user User
		key  string
	}
	jobs := make(chan job)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for j := range jobs {
				if err := post(ctx, client, base, j.user, j.key, created); err != nil {
					errs <- err
					return
				}
			}
		})
	}
feed:
	for _, u := range users {
		for i := range keys {
			select {
			case jobs <- job{u, prefix + strconv.Itoa(i)}:
			case err := <-errs:
				close(jobs)
				wg.Wait()
				return err
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return post(ctx, client, base, users[0], prefix+"0", replayed)
}

// post sends one payment and checks its answer.
func post(ctx context.Context, client *http.Client, base string, user User, key string, accept func(*http.Response) bool) error {
	req, err := paymentRequest(base, user, key)
	if err != nil {
		return err
	}
	resp, err := client.Do(req.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("error posting a payment: %w", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !accept(resp) {
		return fmt.Errorf("POST /payments with key %q answered %d (Idempotent-Replayed: %q): %s",
			key, resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), body)
	}
	return nil
}
