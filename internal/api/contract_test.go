package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	apispec "github.com/paymentsd/paymentsd/api"
	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/problem"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// contract checks real exchanges with a running service against
// api/openapi.yaml.
type contract struct {
	svc    *testutil.Service
	doc    *openapi3.T
	router routers.Router
	// problems are the documented problem types (x-problem-types) by URI.
	problems map[string]problemType
}

type problemType struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
}

// exchange is one request and the answer the test expects.
type exchange struct {
	method, path, body string
	header             []string // name, value pairs
	status             int
	contentType        string
	// invalid: the request breaks the document's own rules, so the
	// document must reject it too. noRoute: no documented operation matches.
	invalid, noRoute bool
}

// post is POST /payments with an API key, an Idempotency-Key and a JSON body.
func post(apiKey, key, body string) exchange {
	return exchange{method: http.MethodPost, path: "/payments", body: body, header: []string{
		"Authorization", "Bearer " + apiKey, "Idempotency-Key", key, "Content-Type", "application/json",
	}}
}

// get is GET path, with an API key when one is given.
func get(path, apiKey string) exchange {
	x := exchange{method: http.MethodGet, path: path}
	if apiKey != "" {
		x.header = []string{"Authorization", "Bearer " + apiKey}
	}
	return x
}

// want sets the expected status and the content type that goes with it.
func (x exchange) want(status int) exchange {
	x.status, x.contentType = status, "application/json"
	if status >= 400 {
		x.contentType = problem.ContentType
	}
	return x
}

func (x exchange) bad() exchange      { x.invalid = true; return x }
func (x exchange) unrouted() exchange { x.noRoute = true; return x }

// with replaces header name; an empty value removes it.
func (x exchange) with(name, value string) exchange {
	var h []string
	for i := 0; i+1 < len(x.header); i += 2 {
		if x.header[i] != name {
			h = append(h, x.header[i], x.header[i+1])
		}
	}
	if value != "" {
		h = append(h, name, value)
	}
	x.header = h
	return x
}

func newContract(t *testing.T) *contract {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(apispec.OpenAPI)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(loader.Context))
	// The document's servers name make run's address; the service under test
	// listens on a port of its own, so routes match on paths only.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	require.NoError(t, err)

	raw, err := json.Marshal(doc.Extensions["x-problem-types"])
	require.NoError(t, err)
	var types []problemType
	require.NoError(t, json.Unmarshal(raw, &types))
	c := &contract{svc: testutil.StartService(t, testutil.ServiceOptions{}), doc: doc, router: router, problems: map[string]problemType{}}
	var uris []any
	for _, pt := range types {
		c.problems[pt.Type] = pt
		uris = append(uris, pt.Type)
	}
	require.ElementsMatch(t, uris, doc.Components.Schemas["ProblemType"].Value.Enum, "x-problem-types and the ProblemType enum disagree")
	return c
}

func (c *contract) request(x exchange) (*http.Request, error) {
	req, err := http.NewRequest(x.method, c.svc.URL+x.path, strings.NewReader(x.body))
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(x.header); i += 2 {
		req.Header.Add(x.header[i], x.header[i+1])
	}
	return req, nil
}

// send sends x. It does not use t, so it may run on any goroutine.
func (c *contract) send(x exchange) (*testutil.Response, error) {
	req, err := c.request(x)
	if err != nil {
		return nil, err
	}
	resp, err := c.svc.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return &testutil.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, err
}

// run sends x and checks the exchange against the document.
func (c *contract) run(t *testing.T, x exchange) *testutil.Response {
	t.Helper()
	resp, err := c.send(x)
	require.NoError(t, err)
	c.check(t, x, resp)
	return resp
}

// bearer accepts any request that presents a bearer token: whether it is
// valid is the server's business.
func bearer(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	h := in.RequestValidationInput.Request.Header.Get("Authorization")
	if token, ok := strings.CutPrefix(h, "Bearer "); in.SecuritySchemeName != "bearerAuth" || !ok || token == "" {
		return in.NewError(errors.New("no bearer token"))
	}
	return nil
}

// check validates the request of x and resp against the document.
func (c *contract) check(t *testing.T, x exchange, resp *testutil.Response) {
	t.Helper()
	ctx := context.Background()
	what := x.method + " " + x.path
	require.Equal(t, x.status, resp.Status, "%s: %s", what, resp.Body)
	require.Equal(t, x.contentType, resp.Header.Get("Content-Type"), what)

	req, err := c.request(x)
	require.NoError(t, err)
	route, params, err := c.router.FindRoute(req)
	if x.noRoute {
		require.Error(t, err, "%s: the document has an operation for it", what)
		var v any
		require.NoError(t, json.Unmarshal(resp.Body, &v))
		require.NoError(t, c.doc.Components.Schemas["Problem"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()), what)
	} else {
		require.NoError(t, err, what)
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: bearer, MultiError: true}}
		if err := openapi3filter.ValidateRequest(ctx, in); x.invalid {
			require.Error(t, err, "%s: the server refused a request the document allows", what)
		} else {
			require.NoError(t, err, "%s: the server accepted a request the document forbids", what)
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.Status, Header: resp.Header,
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
		out.SetBodyBytes(resp.Body)
		require.NoError(t, openapi3filter.ValidateResponse(ctx, out), "%s: %d %s", what, resp.Status, resp.Body)
		recordAnswer(route.Path, x.method, resp.Status, x.contentType, resp.Body)
	}

	if x.contentType == problem.ContentType {
		var got problemType
		require.NoError(t, json.Unmarshal(resp.Body, &got))
		documented, ok := c.problems[got.Type]
		require.True(t, ok, "%s: undocumented problem type %q", what, got.Type)
		require.Equal(t, documented, got, "%s: problem differs from x-problem-types", what)
		require.Equal(t, resp.Status, got.Status, what)
	}
}

// TestContract sends real exchanges to one service, in order, and checks
// each against api/openapi.yaml: the subtests share the service and build on
// each other's keys.
func TestContract(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey   string
		otherKey string // another user's
	}

	// setup starts a service whose exchanges are checked against
	// api/openapi.yaml (newContract), and makes two users of it.
	setup := func(t *testing.T) (*contract, *testBundle) {
		t.Helper()
		c := newContract(t)
		_, apiKey := c.svc.NewUser(t)
		_, otherKey := c.svc.NewUser(t)
		return c, &testBundle{apiKey: apiKey, otherKey: otherKey}
	}

	c, bundle := setup(t)
	svc := c.svc
	const declined = `{"amount": 500, "currency": "eur", "payment_method": "pm_card_chargeDeclined"}`

	t.Run("operations", func(t *testing.T) {
		c.run(t, get("/healthz", "").want(http.StatusOK))
		c.run(t, get("/readyz", "").want(http.StatusOK))
		x := get("/openapi.yaml", "").want(http.StatusOK)
		x.contentType = "application/yaml"
		require.Equal(t, apispec.OpenAPI, c.run(t, x).Body)
	})

	t.Run("create and get", func(t *testing.T) {
		first := c.run(t, post(bundle.apiKey, "contract-1", visa).want(http.StatusCreated))
		require.Empty(t, first.Header.Get("Idempotent-Replayed"))
		replay := c.run(t, post(bundle.apiKey, "contract-1", visa).want(http.StatusCreated))
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
		require.Equal(t, first.Body, replay.Body)

		// Both key forms, and a bare key using the punctuation it may use.
		c.run(t, post(bundle.apiKey, `"contract 2; (sf-string) \"quoted\" \\"`, visa).want(http.StatusCreated))
		c.run(t, post(bundle.apiKey, "contract:3/a+b=c&d!#$%'*.^_|~<>?@[]{}`", visa).want(http.StatusCreated))
		noDescription := `{"amount": 100, "currency": "usd", "payment_method": "pm_card_visa", "description": null}`
		c.run(t, post(bundle.apiKey, "contract-4", noDescription).want(http.StatusCreated))

		location := first.Header.Get("Location")
		c.run(t, get(location, bundle.apiKey).want(http.StatusOK))
		c.run(t, get(location, bundle.otherKey).want(http.StatusNotFound))
		c.run(t, get("/payments/abc", bundle.apiKey).want(http.StatusBadRequest).bad())
		c.run(t, get("/payments/0", bundle.apiKey).want(http.StatusBadRequest).bad())
		c.run(t, get("/no/such/path", "").want(http.StatusNotFound).unrouted())
		c.run(t, exchange{method: http.MethodDelete, path: "/payments", header: []string{"Authorization", "Bearer " + bundle.apiKey}}.
			want(http.StatusMethodNotAllowed).unrouted())
	})

	t.Run("refusals", func(t *testing.T) {
		c.run(t, post(bundle.apiKey, "r-1", `{"amount": 0, "currency": "USD", "payment_method": "pm_card_visa", "tip": 1}`).
			want(http.StatusBadRequest).bad())
		c.run(t, post(bundle.apiKey, "r-2", `not json`).want(http.StatusBadRequest).bad())
		c.run(t, post(bundle.apiKey, "", visa).with("Idempotency-Key", "").want(http.StatusBadRequest).bad())
		for _, key := range []string{"a,b", "a b", `"unterminated`, `"k";p=1`, strings.Repeat("k", 256)} {
			c.run(t, post(bundle.apiKey, key, visa).want(http.StatusBadRequest).bad())
		}
		c.run(t, post("", "r-3", visa).with("Authorization", "").want(http.StatusUnauthorized).bad())
		c.run(t, post("pd_not_a_key", "r-3", visa).want(http.StatusUnauthorized))
		c.run(t, get("/payments/1", "pd_not_a_key").want(http.StatusUnauthorized))
		c.run(t, post(bundle.apiKey, "r-4", visa).with("Content-Type", "text/plain").want(http.StatusUnsupportedMediaType).bad())
		huge := `{"amount":1,"currency":"usd","payment_method":"pm_card_visa","description":"` + strings.Repeat("x", 1<<20) + `"}`
		c.run(t, post(bundle.apiKey, "r-5", huge).want(http.StatusRequestEntityTooLarge).bad())
		c.run(t, post(bundle.apiKey, "contract-1", strings.Replace(visa, "2000", "2001", 1)).want(http.StatusUnprocessableEntity))
	})

	t.Run("processor outcomes", func(t *testing.T) {
		rejected := `{"amount": 500, "currency": "usd", "payment_method": "pm_unknown_thing"}`
		first := c.run(t, post(bundle.apiKey, "p-1", rejected).want(http.StatusBadRequest))
		again := c.run(t, post(bundle.apiKey, "p-1", rejected).want(http.StatusBadRequest))
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		require.Equal(t, first.Body, again.Body)

		c.run(t, post(bundle.apiKey, "p-2", declined).want(http.StatusPaymentRequired))
		replay := c.run(t, post(bundle.apiKey, "p-2", declined).want(http.StatusPaymentRequired))
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))

		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.Fault500})
		c.run(t, post(bundle.apiKey, "p-3", visa).want(http.StatusServiceUnavailable))
		c.run(t, post(bundle.apiKey, "p-3", visa).want(http.StatusCreated)) // resumes

		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		parked := c.run(t, post(bundle.apiKey, "p-4", visa).want(http.StatusServiceUnavailable))
		require.Contains(t, string(parked.Body), "needs-attention")
		require.NotEmpty(t, parked.Header.Get("Retry-After"))
	})

	t.Run("refunds and lists", func(t *testing.T) {
		paid := c.run(t, post(bundle.apiKey, "to-refund", visa).want(http.StatusCreated))
		var p struct {
			ID string `json:"id"`
		}
		require.NoError(t, json.Unmarshal(paid.Body, &p))
		refunds := "/payments/" + p.ID + "/refunds"
		refund := func(key, body string) exchange {
			x := post(bundle.apiKey, key, body)
			x.path = refunds
			return x
		}
		made := c.run(t, refund("rf-1", `{"amount": 500, "reason": "requested_by_customer"}`).want(http.StatusCreated))
		replay := c.run(t, refund("rf-1", `{"amount": 500, "reason": "requested_by_customer"}`).want(http.StatusCreated))
		require.Equal(t, made.Body, replay.Body)
		c.run(t, refund("rf-2", `{"amount": 5000}`).want(http.StatusBadRequest))
		c.run(t, refund("rf-3", `{"amount": -1}`).want(http.StatusBadRequest).bad())
		c.run(t, refund("rf-4", `{}`).with("Authorization", "Bearer "+bundle.otherKey).want(http.StatusNotFound))
		c.run(t, get(made.Header.Get("Location"), bundle.apiKey).want(http.StatusOK))
		c.run(t, get("/refunds/999999", bundle.apiKey).want(http.StatusNotFound))
		c.run(t, get(refunds, bundle.apiKey).want(http.StatusOK))
		c.run(t, get(refunds+"?limit=1", bundle.apiKey).want(http.StatusOK))
		c.run(t, get("/payments?limit=2", bundle.apiKey).want(http.StatusOK))
		c.run(t, get("/payments?starting_after="+p.ID, bundle.apiKey).want(http.StatusOK))
		c.run(t, get("/payments?limit=1000", bundle.apiKey).want(http.StatusBadRequest).bad())

		// A charged-back payment: Stripe refuses its refund (payment-charged-back).
		disputed := c.run(t, post(bundle.apiKey, "to-dispute", visa).want(http.StatusCreated))
		var d struct {
			ID       string `json:"id"`
			StripePI string `json:"stripe_payment_intent_id"`
		}
		require.NoError(t, json.Unmarshal(disputed.Body, &d))
		_, err := svc.Stripe.OpenDispute(d.StripePI, "")
		require.NoError(t, err)
		chargedBack := post(bundle.apiKey, "rf-disputed", `{}`)
		chargedBack.path = "/payments/" + d.ID + "/refunds"
		refused := c.run(t, chargedBack.want(http.StatusBadRequest))
		require.Contains(t, string(refused.Body), `"type":"https://paymentsd.dev/problems/payment-charged-back"`)
	})

	t.Run("capture and cancel", func(t *testing.T) {
		const manual = `{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "capture_method": "manual"}`
		authorize := func(key string) string {
			made := c.run(t, post(bundle.apiKey, key, manual).want(http.StatusCreated))
			var p struct {
				ID string `json:"id"`
			}
			require.NoError(t, json.Unmarshal(made.Body, &p))
			return p.ID
		}
		to := func(id, action, key, body string) exchange {
			x := post(bundle.apiKey, key, body)
			x.path = "/payments/" + id + "/" + action
			return x
		}
		id := authorize("auth-1")
		c.run(t, to(id, "capture", "cap-0", `{"amount_to_capture": 2001}`).want(http.StatusBadRequest))
		c.run(t, to(id, "capture", "cap-1", `{"amount_to_capture": 0}`).want(http.StatusBadRequest).bad())
		c.run(t, to(id, "capture", "cap-1", `{}`).with("Authorization", "Bearer "+bundle.otherKey).want(http.StatusNotFound))
		captured := c.run(t, to(id, "capture", "cap-1", `{"amount_to_capture": 1500}`).want(http.StatusOK))
		replay := c.run(t, to(id, "capture", "cap-1", `{"amount_to_capture": 1500}`).want(http.StatusOK))
		require.Equal(t, captured.Body, replay.Body)
		c.run(t, to(id, "capture", "cap-1", `{}`).want(http.StatusUnprocessableEntity))
		c.run(t, to(id, "capture", "cap-2", `{}`).want(http.StatusBadRequest))
		c.run(t, to(id, "cancel", "cancel-1", `{}`).want(http.StatusBadRequest))

		id = authorize("auth-2")
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.Fault500, Op: stripefake.OpCapturePaymentIntent})
		c.run(t, to(id, "capture", "cap-3", `{}`).want(http.StatusServiceUnavailable))
		c.run(t, to(id, "capture", "cap-3", `{}`).want(http.StatusOK)) // resumes

		id = authorize("auth-3")
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.Fault500, Op: stripefake.OpCancelPaymentIntent})
		c.run(t, to(id, "cancel", "cancel-2", `{}`).want(http.StatusServiceUnavailable))
		c.run(t, to(id, "cancel", "cancel-2", `{}`).want(http.StatusOK)) // resumes
		c.run(t, to(id, "cancel", "cancel-3", `{"reason": "x"}`).want(http.StatusBadRequest).bad())
		c.run(t, get("/payments/"+id, bundle.apiKey).want(http.StatusOK))
	})

	t.Run("key in use", func(t *testing.T) {
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultHang})
		defer svc.Stripe.ReleaseHangs() // also when the test fails before it releases them
		x := post(bundle.apiKey, "hang", visa)
		type result struct {
			resp *testutil.Response
			err  error
		}
		hung := make(chan result, 1)
		go func() {
			resp, err := c.send(x)
			hung <- result{resp, err}
		}()
		testutil.WaitFor(t, 5*time.Second, 10*time.Millisecond, func() bool { return svc.Stripe.Stats().Hangs == 1 })
		c.run(t, x.want(http.StatusConflict))
		svc.Stripe.ReleaseHangs()
		r := <-hung
		require.NoError(t, r.err)
		c.check(t, x.want(http.StatusCreated), r.resp)
	})
}

// The document's pattern for a payment's description is written in the
// regex syntax ECMA-262 and Go share (\xHH), so JSON Schema tools read it;
// it must accept exactly the characters the server's validator accepts.
func TestDescriptionPatternAgreesWithTheValidator(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(apispec.OpenAPI)
	require.NoError(t, err)
	pattern := doc.Components.Schemas["CreatePaymentRequest"].Value.Properties["description"].Value.Pattern
	require.NotContains(t, pattern, `\x{`, "Go-only regex syntax")
	re := regexp.MustCompile(pattern)

	runes := []rune{0x2028, 0x2029, 0xFEFF, 0xFFFD, 0x1F600, 0x10FFFF}
	for r := rune(0); r <= 0x2FF; r++ {
		runes = append(runes, r)
	}
	for _, r := range runes {
		description := "a" + string(r) + "b"
		value, err := json.Marshal(description)
		require.NoError(t, err)
		body := `{"amount": 100, "currency": "usd", "payment_method": "pm_card_visa", "description": ` + string(value) + `}`
		_, errs := payments.DecodeParams([]byte(body))
		require.Equal(t, errs == nil, re.MatchString(description), "U+%04X: the validator says %v", r, errs)
	}
}
