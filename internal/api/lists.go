package api

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/google/uuid"

	"github.com/paymentsd/paymentsd/internal/ids"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// Page sizes of a list, as Stripe's.
const (
	defaultListLimit = 10
	maxListLimit     = 100
)

// list is a page of a list answer, Stripe's shape: newest first.
type list[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
	URL     string `json:"url"`
}

// cursor is a list request's paging: limit, and at most one of
// startingAfter (older than that id) and endingBefore (newer than it).
type cursor struct {
	limit         int32
	startingAfter *uuid.UUID
	endingBefore  *uuid.UUID
}

// after is startingAfter as the list queries take it.
func (c cursor) after() uuid.NullUUID {
	if c.startingAfter == nil {
		return uuid.NullUUID{}
	}
	return uuid.NullUUID{UUID: *c.startingAfter, Valid: true}
}

// parseCursor reads limit, starting_after and ending_before (ids with
// prefix, as the list hands them out), refusing any other query parameter.
// On failure it has answered and returns false.
func parseCursor(w http.ResponseWriter, query url.Values, prefix string) (cursor, bool) {
	c := cursor{limit: defaultListLimit}
	var errs []problem.FieldError
	fail := func(name, detail string) {
		errs = append(errs, problem.FieldError{Pointer: "/" + name, Detail: detail})
	}
	id := func(name string) *uuid.UUID {
		raw, ok := query[name]
		if !ok {
			return nil
		}
		v, err := ids.Parse(prefix, raw[len(raw)-1])
		if err != nil || len(raw) > 1 {
			fail(name, "must be one id of the list ("+prefix+"_…)")
			return nil
		}
		return &v
	}
	for name := range query {
		if !slices.Contains([]string{"limit", "starting_after", "ending_before"}, name) {
			fail(name, "unknown query parameter")
		}
	}
	if raw, ok := query["limit"]; ok {
		n, err := strconv.Atoi(raw[len(raw)-1])
		if err != nil || n < 1 || n > maxListLimit || len(raw) > 1 {
			fail("limit", "must be one integer from 1 to 100")
		}
		c.limit = int32(n)
	}
	c.startingAfter, c.endingBefore = id("starting_after"), id("ending_before")
	if c.startingAfter != nil && c.endingBefore != nil {
		fail("ending_before", "cannot be combined with starting_after")
	}
	if errs != nil {
		slices.SortFunc(errs, func(a, b problem.FieldError) int {
			if a.Pointer < b.Pointer {
				return -1
			}
			return 1
		})
		p := problem.New(problem.InvalidRequest, "The list's query parameters are not valid.")
		p.Errors = errs
		writeProblem(w, p)
		return cursor{}, false
	}
	return c, true
}

// page turns the rows of a list query (limit + 1 of them, read newest first,
// or oldest first when paging back with ending_before) into the answer.
func page[R, V any](c cursor, rows []R, view func(R) V, url string) list[V] {
	out := list[V]{Object: "list", Data: []V{}, URL: url}
	if len(rows) > int(c.limit) {
		out.HasMore, rows = true, rows[:c.limit]
	}
	if c.endingBefore != nil {
		slices.Reverse(rows)
	}
	for _, r := range rows {
		out.Data = append(out.Data, view(r))
	}
	return out
}
