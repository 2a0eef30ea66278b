package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/paymentsd/paymentsd/internal/api"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// Example_endpoint is the recipe for a new idempotent endpoint in
// miniature, compiled by CI so that it keeps to the engine's API: a flow of
// steps in order, and an Endpoint that names its route, its flow and its
// decoder. A real one (internal/phases/refunds, mounted in internal/app)
// writes rows with its queries, and makes its foreign call through package
// stripeonce.
func Example_endpoint() {
	type giftCard struct {
		Amount int64  `json:"amount"`
		Code   string `json:"code,omitempty"`
	}
	// The flow's steps in the order they run, each named for the recovery
	// point the key stands at when it runs; a giftCard is what they hand
	// each other, and Load rebuilds it for a run that resumes the key.
	load := func(ctx context.Context, tx db.Tx, run *phases.Run) (giftCard, error) {
		var card giftCard
		return card, json.Unmarshal(run.Key.RequestParams, &card)
	}
	flow := phases.Flow[giftCard]{Name: "gift_card", Load: load, Steps: []phases.Step[giftCard]{
		// Local: work in the phase transaction; the engine fuses it with
		// the reservation and records where the key stands, fenced by the
		// lease.
		phases.Local(phases.Started, func(ctx context.Context, tx db.Tx, run *phases.Run, card *giftCard) (phases.Transition, error) {
			return phases.Next(), json.Unmarshal(run.Key.RequestParams, card)
		}),
		// Foreign: one side effect with no transaction open; its result,
		// typed, is recorded in the next transaction.
		phases.Foreign("card_requested",
			func(ctx context.Context, run *phases.Run, card *giftCard) (string, error) {
				// The remote call. An error is an unknown outcome: a later
				// run calls again, so the remote side must deduplicate by
				// a key derived from the client's intent (package intent).
				return "gc_123", nil
			},
			func(ctx context.Context, tx db.Tx, run *phases.Run, card *giftCard, code string) (phases.Transition, error) {
				card.Code = code
				body, err := json.Marshal(card)
				return phases.FinishWith(&phases.Response{Status: http.StatusCreated,
					Headers: map[string]string{"Content-Type": "application/json"}, Body: body}), err
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
