package jsonbody

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

var splitSeeds = []string{
	`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`,
	" {\n\t\"a\" : [1, {\"b\":\"}\"}, \"]\\\"\"] , \"c\":null } ",
	`{}`, `{"a":1,"a":2}`, `{"\u0061":1}`, `[1]`, `{"a":1}{}`, `{"a":"x\"y"}`, `"str"`, `{`, ``,
	`{"a":{"b":{"c":[[]]}},"d":-1.5e3,"e":true}`,
	` { } `, `{"a":-0.5E+10,"b":0,"c":-0,"d":1e9,"e":false,"f":null,"g":""}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`,
	`{"a":-}`, `{"a":1e}`, `{"a":1e+}`, `{"a":tru}`, `{"a":nul}`, `{"a":"x" "b":1}`, `{"a":1,}`, `{"a":1} x`,
	`{"a" 1}`, `{a:1}`, `{"a":1,"b":2,"a":3}`, "{\"a\":\"tab\there\"}", `{"a":+1}`, `{"a":1}}`, `{"a":"\u00e9"}`,
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
	for name, split := range map[string]func([]byte, *members) bool{"splitFlat": splitFlat, "splitObject": splitObject} {
		var fast, slow members
		if !split(body, &fast) {
			continue
		}
		require.True(t, json.Valid(body), "%s split %q, which is not JSON", name, body)
		require.NoError(t, readMembers(body, &slow), "%s split %q", name, body)
		require.Len(t, fast.list, len(slow.list), "%s split %q", name, body)
		for _, m := range slow.list {
			raw, ok := fast.get(m.name)
			require.True(t, ok, "%s: member %q of %q", name, m.name, body)
			require.Equal(t, m.raw, raw, "%s: member %q of %q", name, m.name, body)
		}
	}
}

// TestSplitFlatTakesScalarObjects: the bodies splitFlat is for are read by
// it, and the rest are left to the readers after it.
func TestSplitFlatTakesScalarObjects(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`,
		` {"a" : -0.5E+10 , "b":null,"c":true}` + "\n", `{}`,
	} {
		require.True(t, splitFlat([]byte(body), &members{}), body)
	}
	for _, body := range splitSeeds[1:] {
		if !json.Valid([]byte(body)) {
			require.False(t, splitFlat([]byte(body), &members{}), body)
		}
	}
	for _, body := range []string{`{"a":{"b":1}}`, `{"a":[1]}`, `{"a":"\u00e9"}`, `{"\u0061":1}`, `{"a":1,"a":2}`} {
		require.False(t, splitFlat([]byte(body), &members{}), "not flat: %s", body)
	}
}
