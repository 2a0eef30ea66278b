package stripefake

import (
	"bytes"
	"encoding/json"
)

// previousAttributes is the previous_attributes of a *.updated event: the
// top-level attributes whose JSON differs between before and after (wire
// forms of the same object), each with its value before the change. An
// attribute the object did not show before is null there; one it no longer
// shows keeps its old value. Like Stripe's, a changed hash or array is
// given whole.
func previousAttributes(before, after any) map[string]any {
	old, cur := wireFields(before), wireFields(after)
	prev := map[string]any{}
	for k, v := range cur {
		if o, ok := old[k]; !ok {
			prev[k] = nil
		} else if !bytes.Equal(o, v) {
			prev[k] = o
		}
	}
	for k, o := range old {
		if _, ok := cur[k]; !ok {
			prev[k] = o
		}
	}
	return prev
}

// wireFields splits a wire object into its top-level attributes' JSON.
func wireFields(v any) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(marshalWire(v), &m); err != nil {
		panic("stripefake: decoding a wire object: " + err.Error())
	}
	return m
}
