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
	members, ok := splitObject([]byte(splitSeeds[1]))
	require.True(t, ok)
	require.Equal(t, `[1, {"b":"}"}, "]\""]`, string(members["a"]))
	require.Equal(t, `null`, string(members["c"]))
	_, ok = splitObject([]byte(`{"a":1,"a":2}`))
	require.False(t, ok, "a member twice goes to the token reader, which names it")
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
	fast, ok := splitObject(body)
	if !ok {
		return
	}
	slow, err := readMembers(body)
	require.NoError(t, err, "split %q", body)
	require.Len(t, fast, len(slow))
	for name, raw := range slow {
		require.Equal(t, string(raw), string(fast[name]), "member %q of %q", name, body)
	}
}
