package output

import (
	"bytes"
	"regexp"
	"testing"
)

// TestCallGraphBranches: branch lines run down while a level has callees
// to come, end at the last, and a lone callee path stays on its level.
func TestCallGraphBranches(t *testing.T) {
	var b bytes.Buffer
	g := NewCallGraph(&b, "prog")
	time := int64(1000)
	var depth int
	enter := func(fn string) {
		time += 1000
		g.Write(&Record{Kind: KindEntry, Func: fn, Depth: depth, Time: time})
		depth++
	}
	leave := func(fn string) {
		depth--
		time += 1000
		g.Write(&Record{Kind: KindReturn, Func: fn, Depth: depth, Time: time})
	}
	call := func(fn string, inner ...func()) {
		enter(fn)
		for _, f := range inner {
			f()
		}
		leave(fn)
	}
	call("main", func() {
		call("a", func() { call("x") }, func() { call("y", func() { call("z") }) })
		call("b", func() { call("c") })
		call("d")
	})
	g.Comment("2 returns lost")
	g.Finish()
	got := regexp.MustCompile(`(?m)^ +[0-9.]+ (us|ms| s) :`).ReplaceAllString(b.String(), "T :")
	want := `# Function Call Graph for 'prog'
========== FUNCTION CALL GRAPH ==========
# TOTAL TIME   FUNCTION
T : (1) prog
T : (1) main
T :  +-(1) a
T :  |  +-(1) x
             :  |  |
T :  |  +-(1) y
T :  |    (1) z
             :  |
T :  +-(1) b
T :  | (1) c
             :  |
T :  +-(1) d
# 2 returns lost
`
	if got != want {
		t.Errorf("graph:\n%s\nwant\n%s", got, want)
	}
}
