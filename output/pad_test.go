package output

import (
	"fmt"
	"testing"
)

// The pads format as fmt's verbs they stand for.
func TestPadsAreFmt(t *testing.T) {
	for _, v := range []int64{0, 7, -7, 42, -42, 123456, -1234567, 1 << 62, -1 << 63} {
		for _, w := range []int{0, 1, 3, 5, 7, 16} {
			check := func(verb string, got []byte) {
				t.Helper()
				if want := fmt.Sprintf(verb, w, v); string(got) != "x"+want {
					t.Errorf("%s of %d in %d: %q, want %q", verb, v, w, got, "x"+want)
				}
			}
			check("%*d", appendIntRight([]byte("x"), v, w))
			check("%-*d", appendIntLeft([]byte("x"), v, w))
			check("%0*d", appendIntZero([]byte("x"), v, w))
			s := fmt.Sprint(v)
			if got, want := string(appendRight([]byte("x"), s, w)), "x"+fmt.Sprintf("%*s", w, s); got != want {
				t.Errorf("%%*s of %q in %d: %q, want %q", s, w, got, want)
			}
		}
	}
}
