package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/paymentsd/paymentsd/internal/api"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// Example_endpoint is the recipe for a new idempotent endpoint, compiled and
// run by CI so docs/adding-an-endpoint.md cannot drift from the code: a flow
// of typed steps, and an Endpoint that names its route, its flow and its
// decoder. A real one (internal/phases/refunds, mounted in internal/app)
// adds its queries and a foreign call through package stripeonce.
func Example_endpoint() {
	type giftCard struct {
		Amount int64 `json:"amount"`
	}
	flow := phases.Flow{Name: "gift_card", Steps: map[phases.RecoveryPoint]phases.Step{
		// Local: work in the phase transaction; the engine fuses it with
		// the reservation and writes the transition, fenced by the lease.
		phases.Started: phases.Local(func(ctx context.Context, tx pgx.Tx, run *phases.Run) (phases.Transition, error) {
			var card giftCard
			if err := json.Unmarshal(run.Key.RequestParams, &card); err != nil {
				return phases.Transition{}, err
			}
			phases.Keep(run, &card) // for the next step of this run
			return phases.AdvanceTo("issued"), nil
		}),
		// Foreign: one side effect with no transaction open; its result,
		// typed, is recorded in the next transaction.
		"issued": phases.Foreign(
			func(ctx context.Context, run *phases.Run) (string, error) {
				return "gc_123", nil // the remote call, under an intent-derived key
			},
			func(ctx context.Context, tx pgx.Tx, run *phases.Run, code string) (phases.Transition, error) {
				body, _ := json.Marshal(map[string]string{"code": code})
				return phases.FinishWith(&phases.Response{Status: http.StatusCreated, Body: body}), nil
			}),
	}}
	endpoint := api.Endpoint{
		Method: http.MethodPost, Pattern: "/gift_cards", Noun: "gift card", Flow: flow,
		Decode: func(body []byte, _ func(string) string) ([]byte, []problem.FieldError) {
			var card giftCard
			if err := json.Unmarshal(body, &card); err != nil || card.Amount < 1 {
				return nil, []problem.FieldError{{Pointer: "/amount", Detail: "must be a positive integer"}}
			}
			params, _ := json.Marshal(card)
			return params, nil
		},
	}
	// app.New hands every endpoint to api.NewServer, which registers each
	// flow with the engine (refusing a malformed or duplicate one) and
	// routes the endpoint to the one handler all idempotent endpoints share.
	engine := phases.New(nil, phases.Config{})
	fmt.Println(engine.Register(endpoint.Flow))
	fmt.Println(engine.Register(endpoint.Flow) != nil)
	// Output:
	// <nil>
	// true
}
