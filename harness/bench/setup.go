package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DatabaseURL is adminURL with its database replaced by db. It accepts the
// URL form (postgres://…/name?…) and the keyword form (host=… dbname=…).
func DatabaseURL(adminURL, db string) (string, error) {
	if strings.HasPrefix(adminURL, "postgres://") || strings.HasPrefix(adminURL, "postgresql://") {
		u, err := url.Parse(adminURL)
		if err != nil {
			return "", fmt.Errorf("error parsing the database URL: %w", err)
		}
		u.Path, u.RawPath = "/"+db, ""
		return u.String(), nil
	}
	if _, err := pgx.ParseConfig(adminURL); err != nil {
		return "", fmt.Errorf("error parsing the database URL: %w", err)
	}
	// In the keyword form the last setting of a keyword wins.
	return adminURL + " dbname=" + db, nil
}

// redact hides the password of a URL-form database URL for messages.
func redact(dbURL string) string {
	if u, err := url.Parse(dbURL); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
	}
	return dbURL
}

// CreateDatabase drops database db on the server at adminURL if it exists,
// creates it afresh, and returns its URL.
func CreateDatabase(ctx context.Context, adminURL, db string) (string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("error connecting to %s: %w", redact(adminURL), err)
	}
	defer conn.Close(ctx)
	name := pgx.Identifier{db}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("error dropping database %s: %w", db, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("error creating database %s: %w", db, err)
	}
	return DatabaseURL(adminURL, db)
}

// DropDatabase drops database db on the server at adminURL, if it exists,
// whoever is connected to it.
func DropDatabase(ctx context.Context, adminURL, db string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("error connecting to %s: %w", redact(adminURL), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("error dropping database %s: %w", db, err)
	}
	return nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// WaitReady polls url until it answers 200, for at most timeout.
func WaitReady(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("%s did not become ready within %s (last: %s)", url, timeout, last)
		}
	}
}

// SetEmulatorLatency makes the Stripe emulator at base answer every create
// after exactly ms milliseconds (its chaos latency, with no faults), or
// turns its chaos off for 0.
func SetEmulatorLatency(ctx context.Context, base string, ms int64) error {
	body := `{"chaos":{}}`
	if ms > 0 {
		body = fmt.Sprintf(`{"chaos":{"latency_ms":%d,"max_latency_ms":%d}}`, ms, ms)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/_fake/faults", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("error setting the emulator's latency: %w", err)
	}
	defer resp.Body.Close()
	var got struct {
		Chaos struct {
			LatencyMS    int64 `json:"latency_ms"`
			MaxLatencyMS int64 `json:"max_latency_ms"`
		} `json:"chaos"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("error setting the emulator's latency: %s (%v)", resp.Status, err)
	}
	if got.Chaos.LatencyMS != ms || got.Chaos.MaxLatencyMS != ms {
		return fmt.Errorf("the emulator's latency is %d–%d ms, not %d", got.Chaos.LatencyMS, got.Chaos.MaxLatencyMS, ms)
	}
	return nil
}
