package output

import (
	"testing"

	"github.com/probedbg/probe/probe"
)

// TestOTLPFieldAttrs: fields become attributes of their kind; an unsigned
// value past int64's range is its decimal text (OTLP's integers are
// signed), not a negative number.
func TestOTLPFieldAttrs(t *testing.T) {
	attrs := fieldAttrs("arg.", []probe.Field{
		{Name: "big", Value: probe.UintValue(probe.TypeU64, 1<<64-1)},
		{Name: "small", Value: probe.UintValue(probe.TypeU64, 7)},
		{Name: "neg", Value: probe.UintValue(probe.TypeS32, 0xffffffff)},
		{Name: "s", Value: probe.StringValue("hi")},
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
