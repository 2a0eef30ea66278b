package jsonbody

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

var splitSeeds = []string{
	`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`,
	" {\n\t\"a\" : [1, {\"b\":\"}\"}, \"]\\\"\"] , \"c\":null } ",
	`{}`, `{"a":1,"a":2}`, `{"\u0061":1}`, `[1]`, `{"a":1}{}`, `{"a":"x\"y"}`, `"str"`, `{`, ``,
	`{"a":{"b":{"c":[[]]}},"d":-1.5e3,"e":true}`,
}

func TestSplitObjectAgreesWithTheTokenReader(t *testing.T) {
	t.Parallel()
	for _, body := range splitSeeds {
		checkSplit(t, []byte(body))
	}
	var m members
	require.True(t, splitObject([]byte(splitSeeds[1]), &m))
	a, _ := m.get("a")
	c, _ := m.get("c")
	require.Equal(t, `[1, {"b":"}"}, "]\""]`, a)
	require.Equal(t, `null`, c)
	require.False(t, splitObject([]byte(`{"a":1,"a":2}`), &members{}), "a member twice goes to the token reader, which names it")
}

// FuzzSplitObject checks the fast split against the token reader: whatever
// it splits, the reader splits the same way.
func FuzzSplitObject(f *testing.F) {
	for _, s := range splitSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkSplit)
}

func checkSplit(t *testing.T, body []byte) {
	if !utf8.Valid(body) {
		return // Parse refuses it before splitting
	}
	var fast, slow members
	if !splitObject(body, &fast) {
		return
	}
	require.NoError(t, readMembers(body, &slow), "split %q", body)
	require.Len(t, fast.list, len(slow.list))
	for _, m := range slow.list {
		raw, ok := fast.get(m.name)
		require.True(t, ok, "member %q of %q", m.name, body)
		require.Equal(t, m.raw, raw, "member %q of %q", m.name, body)
	}
}
