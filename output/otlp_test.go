package output

import (
	"testing"

	"github.com/probedbg/probe/fetch"
)

// TestOTLPFieldAttrs: fields become attributes of their kind; an unsigned
// value past int64's range is its decimal text (OTLP's integers are
// signed), not a negative number.
func TestOTLPFieldAttrs(t *testing.T) {
	attrs := fieldAttrs("arg.", []fetch.Field{
		{Name: "big", Value: fetch.UintValue(fetch.TypeU64, 1<<64-1)},
		{Name: "small", Value: fetch.UintValue(fetch.TypeU64, 7)},
		{Name: "neg", Value: fetch.UintValue(fetch.TypeS32, 0xffffffff)},
		{Name: "s", Value: fetch.StringValue("hi")},
	})
	want := map[string]any{"arg.big": "18446744073709551615", "arg.small": int64(7), "arg.neg": int64(-1), "arg.s": "hi"}
	if len(attrs) != len(want) {
		t.Fatalf("%d attributes, want %d: %v", len(attrs), len(want), attrs)
	}
	for _, a := range attrs {
		var got any = a.Value.GetIntValue()
		if _, ok := want[a.Key].(string); ok {
			got = a.Value.GetStringValue()
		}
		if got != want[a.Key] {
			t.Errorf("%s = %v (%T), want %v", a.Key, got, got, want[a.Key])
		}
	}
}
