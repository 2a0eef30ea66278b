package jsonbody

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/problem"
)

// TestParseNamesADuplicateAmongManyMembers: a body of many members with one
// named twice near its end is refused, naming it.
func TestParseNamesADuplicateAmongManyMembers(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("{")
	for i := range 48 {
		fmt.Fprintf(&b, `"m%d":%d,`, i, i)
	}
	b.WriteString(`"m40":0}`)
	o, errs := Parse([]byte(b.String()))
	require.Nil(t, o)
	require.Len(t, errs, 1)
	require.Equal(t, `member "m40" appears more than once`, errs[0].Detail)
}

// TestParseNamesAFewUnknownMembers: a body of many unknown members gets
// maxUnknown of them named, the first ones written, and a count of the rest.
func TestParseNamesAFewUnknownMembers(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"known":1`)
	for i := range 1000 {
		fmt.Fprintf(&b, `,"u%d":%d`, i, i)
	}
	b.WriteString("}")
	o, errs := Parse([]byte(b.String()), "known")
	require.Nil(t, errs)
	got := o.Errors()
	require.Len(t, got, maxUnknown+1)
	require.Equal(t, problem.FieldError{Pointer: "", Detail: "980 more unknown members"}, got[0])
	for _, e := range got[1:] {
		require.Equal(t, "unknown member", e.Detail, e.Pointer)
	}
	for i := range maxUnknown {
		require.Contains(t, got, problem.FieldError{Pointer: fmt.Sprintf("/u%d", i), Detail: "unknown member"})
	}
}
