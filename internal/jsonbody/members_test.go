package jsonbody

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/problem"
)

// TestMembersPastTheIndexThreshold checks lookups and duplicates on both
// sides of indexFrom, where a scan gives way to an index.
func TestMembersPastTheIndexThreshold(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, indexFrom - 1, indexFrom, indexFrom + 1, 10 * indexFrom} {
		var m members
		for i := range n {
			require.True(t, m.add(fmt.Sprint("m", i), fmt.Sprint(i)), "n=%d i=%d", n, i)
		}
		for i := range n {
			raw, ok := m.get(fmt.Sprint("m", i))
			require.True(t, ok, "n=%d i=%d", n, i)
			require.Equal(t, fmt.Sprint(i), raw)
			require.False(t, m.add(fmt.Sprint("m", i), "again"), "n=%d: m%d twice", n, i)
		}
		_, ok := m.get("absent")
		require.False(t, ok)
		require.Len(t, m.list, n)
	}
}

// TestParseNamesADuplicateAmongManyMembers: a body past indexFrom members
// with one named twice near its end is refused, naming it.
func TestParseNamesADuplicateAmongManyMembers(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("{")
	for i := range 3 * indexFrom {
		fmt.Fprintf(&b, `"m%d":%d,`, i, i)
	}
	b.WriteString(`"m40":0}`)
	o, errs := Parse([]byte(b.String()))
	require.Nil(t, o)
	require.Len(t, errs, 1)
	require.Equal(t, `member "m40" appears more than once`, errs[0].Detail)
}

// TestParseNamesAFewUnknownMembers: a body of many unknown members gets
// maxUnknown of them named and a count of the rest.
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
}
