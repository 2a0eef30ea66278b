package stripefake_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	// Stripe's OpenAPI spec as stripe-mock v0.162.0 embeds it: API version
	// 2022-11-15. stripe-go v79 pins 2024-06-20, but the Go module proxy
	// serves no stripe-mock release of 2024 (v0.186.0 to v0.188.0, which
	// carried it, are refused); of those it serves, v0.162.0 is the nearest
	// (the next, v0.203.0, is 2026-08-26.dahlia, past two releases that
	// removed and renamed fields). 2022-11-15 is the version that made
	// latest_charge what paymentsd reads, and the objects checked here kept
	// their required fields through 2024-06-20; the fields added since are
	// optional to this check (the spec allows additional properties).
	"github.com/stripe/stripe-mock/embedded"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// stripeSpec is Stripe's OpenAPI spec, loaded once (about 2 s).
var stripeSpec = sync.OnceValues(func() (*openapi3.T, error) {
	return openapi3.NewLoader().LoadFromData(embedded.OpenAPISpec)
})

// spec returns the loaded spec or fails the test.
func spec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := stripeSpec()
	require.NoError(t, err, "loading Stripe's OpenAPI spec")
	return doc
}

// componentSchema returns the spec's components.schemas[name].
func componentSchema(t *testing.T, name string) *openapi3.Schema {
	t.Helper()
	ref, ok := spec(t).Components.Schemas[name]
	require.True(t, ok, "the spec has no schema %q", name)
	return ref.Value
}

// specPath finds the spec's path template matching an actual path, e.g.
// /v1/payment_intents/{intent} for /v1/payment_intents/pi_123; literal
// segments win over parameters (/v1/payment_intents/search).
func specPath(doc *openapi3.T, path string) (string, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	best, bestLiterals := "", -1
	for tmpl := range doc.Paths.Map() {
		tsegs := strings.Split(strings.Trim(tmpl, "/"), "/")
		if len(tsegs) != len(segs) {
			continue
		}
		literals, ok := 0, true
		for i, ts := range tsegs {
			switch {
			case strings.HasPrefix(ts, "{"):
			case ts == segs[i]:
				literals++
			default:
				ok = false
			}
		}
		if ok && literals > bestLiterals {
			best, bestLiterals = tmpl, literals
		}
	}
	return best, bestLiterals >= 0
}

// responseSchema is the schema the spec documents for an answer of method
// on path with status: the operation's response for that status, or its
// default (Stripe's error). A path the spec does not have (the emulator's
// 404 for an unknown route) answers with the error schema.
func responseSchema(t *testing.T, method, path string, status int) (*openapi3.Schema, string) {
	t.Helper()
	doc := spec(t)
	tmpl, ok := specPath(doc, path)
	if !ok {
		return componentSchema(t, "error"), "error"
	}
	op := doc.Paths.Find(tmpl).GetOperation(method)
	require.NotNil(t, op, "the spec has no %s %s", method, tmpl)
	resp := op.Responses.Status(status)
	where := fmt.Sprintf("%s %s %d", method, tmpl, status)
	if resp == nil {
		resp = op.Responses.Default()
		where = fmt.Sprintf("%s %s default (%d)", method, tmpl, status)
	}
	require.NotNil(t, resp, "the spec documents no answer %s", where)
	mt := resp.Value.Content.Get("application/json")
	require.NotNil(t, mt, "%s has no JSON body", where)
	return mt.Schema.Value, where
}

// conforms checks a JSON document against schema (what names it in
// messages) and returns every violation, nested objects included.
func conforms(schema *openapi3.Schema, what string, body []byte) error {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("%s: not JSON: %w", what, err)
	}
	err := schema.VisitJSON(v, openapi3.MultiErrors(), openapi3.VisitAsResponse())
	if err == nil {
		return nil
	}
	var me openapi3.MultiError
	if !errors.As(err, &me) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var msgs []string
	for _, e := range me {
		msgs = append(msgs, schemaErrorLines("", e)...)
	}
	return fmt.Errorf("%s does not conform to Stripe's spec:\n  %s\nbody: %s", what, strings.Join(msgs, "\n  "), body)
}

// schemaErrorLines renders one violation as "path: reason" lines. An
// object that matches none of an anyOf's alternatives (an expandable field,
// a nullable nested object) is explained by its violations of each object
// alternative, so that a missing nested field is named.
func schemaErrorLines(prefix string, err error) []string {
	var se *openapi3.SchemaError
	if !errors.As(err, &se) {
		return []string{prefix + ": " + err.Error()}
	}
	at := prefix + "/" + strings.Join(se.JSONPointer(), "/")
	lines := []string{at + ": " + se.Reason}
	if obj, ok := se.Value.(map[string]any); ok && se.SchemaField == "anyOf" {
		for _, alt := range se.Schema.AnyOf {
			if alt.Value == nil || alt.Value.Type == nil || !alt.Value.Type.Is("object") {
				continue
			}
			verr := alt.Value.VisitJSON(obj, openapi3.MultiErrors(), openapi3.VisitAsResponse())
			var me openapi3.MultiError
			if errors.As(verr, &me) {
				for _, e := range me {
					lines = append(lines, schemaErrorLines(at, e)...)
				}
			}
		}
	}
	return lines
}

// requireConforms fails the test unless body conforms to the answer the
// spec documents for method, path and status.
func requireConforms(t *testing.T, method, path string, status int, body []byte) {
	t.Helper()
	schema, where := responseSchema(t, method, path, status)
	require.NoError(t, conforms(schema, where, body))
}

// requireConformsTo fails the test unless body conforms to the component
// schema name.
func requireConformsTo(t *testing.T, name string, body []byte) {
	t.Helper()
	require.NoError(t, conforms(componentSchema(t, name), "schema "+name, body))
}

// answer is one HTTP answer the emulator gave.
type answer struct {
	method, path string
	status       int
	body         []byte
}

// String names the answer in failure messages.
func (a answer) String() string {
	return a.method + " " + a.path + " " + strconv.Itoa(a.status)
}

// recordingTransport is an http.RoundTripper that keeps every answer its client got.
type recordingTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	got  []answer
}

// RoundTrip sends req and records the answer.
func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.add(answer{method: req.Method, path: req.URL.Path, status: resp.StatusCode, body: body})
	return resp, nil
}

// add records an answer.
func (r *recordingTransport) add(a answer) {
	r.mu.Lock()
	r.got = append(r.got, a)
	r.mu.Unlock()
}

// answers returns what was recorded so far.
func (r *recordingTransport) answers() []answer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// recordedEnv is newEnv (webhooks to url, if set) whose stripe-go client
// records every answer it gets.
func recordedEnv(t *testing.T, url string) (*env, *recordingTransport) {
	t.Helper()
	var e *env
	if url != "" {
		e = hookEnv(t, url, stripefake.Options{})
	} else {
		e = newEnv(t, stripefake.Options{})
	}
	rec := &recordingTransport{next: e.srv.Client().Transport}
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(e.srv.URL),
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
		HTTPClient:        &http.Client{Transport: rec},
	})
	e.sc = client.New("sk_test_123", &stripe.Backends{API: backend, Connect: backend, Uploads: backend})
	return e, rec
}
