package ids

import (
	"sort"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestFormatAndParseRoundTrip(t *testing.T) {
	t.Parallel()
	v := New()
	id := Format(Payment, v)
	require.Regexp(t, `^pay_[0-9a-hjkmnp-tv-z]{26}$`, id)
	got, err := Parse(Payment, id)
	require.NoError(t, err)
	require.Equal(t, v, got)
}

func TestParseRefusesEverythingFormatDoesNotWrite(t *testing.T) {
	t.Parallel()
	id := Format(Refund, New())
	for _, bad := range []string{
		"", "re_", "pay" + id[2:], "123", id + "0", id[:len(id)-1],
		"re_" + "ILOU" + id[7:], // letters Crockford leaves out
		id[:3] + "Z" + id[4:],   // upper case
		id[:len(id)-1] + "z",    // the last digit's unused bits set
	} {
		_, err := Parse(Refund, bad)
		require.Error(t, err, "%q", bad)
	}
}

// Ids sort as their UUIDs do, so lists page by either in creation order.
func TestIdsSortAsTheirValues(t *testing.T) {
	t.Parallel()
	values := make([]uuid.UUID, 200)
	for i := range values {
		values[i] = New()
	}
	formatted := make([]string, len(values))
	for i, v := range values {
		formatted[i] = Format(Payment, v)
	}
	sort.Slice(values, func(i, j int) bool { return string(values[i][:]) < string(values[j][:]) })
	sort.Strings(formatted)
	for i, v := range values {
		require.Equal(t, Format(Payment, v), formatted[i])
	}
}
