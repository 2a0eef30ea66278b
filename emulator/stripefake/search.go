package stripefake

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// pageTokenPrefix starts a decoded search page token; the number after it
// is the index (in creation order) of the last PaymentIntent already shown,
// so that results made visible by the lag in the meantime do not shift the
// next page.
const pageTokenPrefix = "stripefake_before:"

// searchClause is one field:value term of a search query.
type searchClause struct {
	field  string // metadata, status, currency or amount
	key    string // metadata key
	value  string
	amount int64
}

// matches reports whether pi satisfies the clause.
func (c searchClause) matches(pi PaymentIntent) bool {
	switch c.field {
	case "metadata":
		v, ok := pi.Metadata[c.key]
		return ok && v == c.value
	case "status":
		return pi.Status == c.value
	case "currency":
		return strings.EqualFold(pi.Currency, c.value)
	case "amount":
		return pi.Amount == c.amount
	}
	return false
}

// queryScanner walks a search query.
type queryScanner struct {
	s string
	i int
}

func (q *queryScanner) eof() bool { return q.i >= len(q.s) }

func (q *queryScanner) skipSpace() {
	for !q.eof() && (q.s[q.i] == ' ' || q.s[q.i] == '\t' || q.s[q.i] == '\n') {
		q.i++
	}
}

// word reads [A-Za-z0-9_.-]*.
func (q *queryScanner) word() string {
	start := q.i
	for !q.eof() {
		c := q.s[q.i]
		if c != '_' && c != '.' && c != '-' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			break
		}
		q.i++
	}
	return q.s[start:q.i]
}

// expect consumes the byte c.
func (q *queryScanner) expect(c byte) error {
	if q.eof() || q.s[q.i] != c {
		return errors.New("expected '" + string(c) + "' at position " + strconv.Itoa(q.i))
	}
	q.i++
	return nil
}

// quoted reads a '...' or "..." string; a backslash escapes the next byte.
func (q *queryScanner) quoted() (string, error) {
	if q.eof() || (q.s[q.i] != '\'' && q.s[q.i] != '"') {
		return "", errors.New("expected a quoted string at position " + strconv.Itoa(q.i))
	}
	quote := q.s[q.i]
	q.i++
	var b strings.Builder
	for !q.eof() {
		c := q.s[q.i]
		q.i++
		switch {
		case c == '\\' && !q.eof():
			b.WriteByte(q.s[q.i])
			q.i++
		case c == quote:
			return b.String(), nil
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("unterminated quoted string")
}

// value reads a quoted string or a bare word.
func (q *queryScanner) value() (string, error) {
	if !q.eof() && (q.s[q.i] == '\'' || q.s[q.i] == '"') {
		return q.quoted()
	}
	if w := q.word(); w != "" {
		return w, nil
	}
	return "", errors.New("expected a value at position " + strconv.Itoa(q.i))
}

// maxSearchClauses is how many clauses one query may combine.
const maxSearchClauses = 10

// searchQuery is a parsed query: its clauses, all of which must match, or
// any one of them when joined by OR.
type searchQuery struct {
	clauses []searchClause
	anyOf   bool
}

// matches reports whether pi satisfies the query.
func (sq searchQuery) matches(pi PaymentIntent) bool {
	for _, c := range sq.clauses {
		if c.matches(pi) == sq.anyOf {
			return sq.anyOf
		}
	}
	return !sq.anyOf
}

// parseSearchQuery parses clauses like metadata['k']:'v' joined by AND (or
// a space), or by OR: as in Stripe's query language, never both in one
// query, and at most maxSearchClauses of them.
func parseSearchQuery(query string) (searchQuery, error) {
	sq, err := parseClauses(query)
	if err == nil && len(sq.clauses) > maxSearchClauses {
		err = errors.New("a query combines at most " + strconv.Itoa(maxSearchClauses) + " clauses")
	}
	return sq, err
}

// parseClauses is parseSearchQuery without the limit on clauses.
func parseClauses(query string) (searchQuery, error) {
	q := &queryScanner{s: query}
	var (
		clauses []searchClause
		and, or bool
	)
	for {
		q.skipSpace()
		c := searchClause{field: q.word()}
		switch c.field {
		case "metadata":
			if err := q.expect('['); err != nil {
				return searchQuery{}, err
			}
			key, err := q.quoted()
			if err != nil {
				return searchQuery{}, err
			}
			if err := q.expect(']'); err != nil {
				return searchQuery{}, err
			}
			c.key = key
		case "status", "currency", "amount":
		case "":
			return searchQuery{}, errors.New("expected a field at position " + strconv.Itoa(q.i))
		default:
			return searchQuery{}, errors.New("unsupported search field '" + c.field + "' (stripefake supports metadata['key'], status, currency and amount)")
		}
		if err := q.expect(':'); err != nil {
			return searchQuery{}, errors.New("only exact match (':') is supported: " + err.Error())
		}
		v, err := q.value()
		if err != nil {
			return searchQuery{}, err
		}
		c.value = v
		if c.field == "amount" {
			if c.amount, err = strconv.ParseInt(v, 10, 64); err != nil {
				return searchQuery{}, errors.New("amount must be an integer, got '" + v + "'")
			}
		}
		clauses = append(clauses, c)

		before := q.i
		q.skipSpace()
		if q.eof() {
			return searchQuery{clauses: clauses, anyOf: or}, nil
		}
		if q.i == before {
			return searchQuery{}, errors.New("expected a space at position " + strconv.Itoa(q.i))
		}
		switch op := q.word(); op {
		case "AND", "OR":
			and, or = and || op == "AND", or || op == "OR"
			if and && or {
				return searchQuery{}, errors.New("AND and OR cannot be combined in one query")
			}
			end := q.i
			if q.skipSpace(); q.i == end {
				return searchQuery{}, errors.New("expected a space after " + op + " at position " + strconv.Itoa(q.i))
			}
		default:
			return searchQuery{}, errors.New("expected AND or OR at position " + strconv.Itoa(q.i-len(op)))
		}
	}
}

// searchResult is Stripe's search result list.
type searchResult struct {
	Object   string               `json:"object"`
	Data     []*paymentIntentJSON `json:"data"`
	HasMore  bool                 `json:"has_more"`
	NextPage *string              `json:"next_page"`
	URL      string               `json:"url"`
}

// searchLag is the lag now in force: the chaos one if set, else the
// server's. The caller holds s.mu.
func (s *Server) searchLag() time.Duration {
	if s.chaos.SearchLag > 0 {
		return s.chaos.SearchLag
	}
	return s.lag
}

// handleSearch answers GET /v1/payment_intents/search, newest first. Like
// Stripe's search it lags writes: a PaymentIntent is found only once the
// search lag (Options.SearchLag, Chaos.SearchLag) has passed since its
// creation. Pages continue after the last PaymentIntent shown.
func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request, _ string) {
	if !s.takeSearch() {
		s.bump(func(st *Stats) { st.SearchesRateLimited++ })
		writeError(w, http.StatusTooManyRequests, rateLimited())
		return
	}
	s.bump(func(st *Stats) { st.Searches++ })
	params := r.URL.Query()
	bad := func(e *errorObject) {
		s.bump(func(st *Stats) { st.InvalidRequests++ })
		writeError(w, http.StatusBadRequest, *e)
	}
	query := params.Get("query")
	if query == "" {
		bad(missingParam("query"))
		return
	}
	sq, err := parseSearchQuery(query)
	if err != nil {
		bad(invalidParam("query", "", "Invalid search query: "+err.Error()))
		return
	}
	limit, perr := limitParam(params)
	if perr != nil {
		bad(perr)
		return
	}
	before := -1 // no page token: start with the newest
	if raw := params.Get("page"); raw != "" {
		dec, decErr := base64.RawURLEncoding.DecodeString(raw)
		n, ok := strings.CutPrefix(string(dec), pageTokenPrefix)
		if before, err = strconv.Atoi(n); decErr != nil || !ok || err != nil || before < 0 {
			bad(invalidParam("page", "", "Invalid page token."))
			return
		}
	}

	expandCharge := expands(params, "data.latest_charge")
	res := searchResult{Object: "search_result", Data: []*paymentIntentJSON{}, URL: "/v1/payment_intents/search"}
	last, lagged := 0, false
	s.mu.Lock()
	now, lag := s.now(), s.searchLag()
	start := len(s.intents) - 1
	if before >= 0 {
		start = min(before-1, start)
	}
	for i := start; i >= 0 && !res.HasMore; i-- {
		rec := s.intents[i]
		switch {
		case !sq.matches(rec.PaymentIntent):
		case lag > 0 && now.Sub(rec.createdAt) < lag:
			lagged = true
		case len(res.Data) == limit:
			res.HasMore = true
		default:
			res.Data = append(res.Data, rec.wireExpanded(expandCharge))
			last = i
		}
	}
	if lagged {
		s.stats.SearchesLagged++
	}
	s.mu.Unlock()
	if res.HasMore {
		next := base64.RawURLEncoding.EncodeToString([]byte(pageTokenPrefix + strconv.Itoa(last)))
		res.NextPage = &next
	}
	writeValue(w, http.StatusOK, res)
}
