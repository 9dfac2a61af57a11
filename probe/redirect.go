package probe

import (
	"bytes"
	"io"
	"maps"
	"slices"

	"github.com/probedbg/probe/codegen"
)

// Redirects: a branch elsewhere in a function that lands inside the
// bytes a detour's jmp covers is re-aimed into the detour, and put back
// at detach.

// redirect is a branch instruction re-aimed into a detour
// (Detour.Redirects): code is what it is now, orig its file's bytes.
type redirect struct{ orig, code []byte }

// redirectReach is how far before a redirected branch another site
// would take it into its own patch: a jmp covers less than 20 bytes.
const redirectReach = 20

// nearRedirect reports whether a site of addrs (sorted), other than the
// detour's own at self, is at r's branch or close enough before it to
// cover it with a jmp.
func nearRedirect(addrs []uint64, r codegen.Redirect, self uint64) bool {
	i, _ := slices.BinarySearch(addrs, r.From-redirectReach)
	for ; i < len(addrs) && addrs[i] < r.From+uint64(len(r.Orig)); i++ {
		if addrs[i] != self {
			return true
		}
	}
	return false
}

// redirectBranches returns what d's redirects write for the detour
// placed at base, nil and false if a branch is in memory neither as in
// the file nor as an earlier detour of the function re-aimed it.
func (t *Tracer) redirectBranches(st *site, d *codegen.Detour, base uint64) (map[uint64]redirect, bool) {
	out := map[uint64]redirect{}
	for _, r := range d.Redirects {
		have := make([]byte, len(r.Orig))
		if _, err := t.proc.ReadAt(have, int64(r.From)); err != nil || !bytes.Equal(have, r.Orig) && !bytes.Equal(have, t.jumps.redirects[r.From].code) {
			return nil, false
		}
		code, err := d.Redirected(r, base)
		if err != nil {
			return nil, false
		}
		out[r.From] = redirect{orig: r.Orig, code: code}
	}
	return out, true
}

// writeRedirects writes the re-aimed branches; if one cannot be
// written, it puts back what it wrote.
func (t *Tracer) writeRedirects(rs map[uint64]redirect) error {
	type undo struct {
		at  uint64
		was []byte
	}
	var done []undo
	for at, r := range rs {
		was := make([]byte, len(r.code))
		_, err := t.proc.ReadAt(was, int64(at))
		if err == nil {
			t.rescueText(at, r.orig)
			_, err = t.proc.WriteAt(r.code, int64(at))
		}
		if err != nil {
			for _, u := range done {
				t.proc.WriteAt(u.was, int64(u.at)) // best effort
			}
			return err
		}
		done = append(done, undo{at, was})
	}
	maps.Copy(t.jumps.redirects, rs)
	return nil
}

// putBackRedirects writes the original bytes of every branch re-aimed
// into a detour, into mem (ours, or a forked child's copy), when no
// thread runs: a thread taking a branch while its rel32 is rewritten
// could read half of each. Until then a re-aimed branch goes to a copy
// that does what the original does, with the jmp there or not.
func (t *Tracer) putBackRedirects(mem io.WriterAt) {
	for at, r := range t.jumps.redirects {
		mem.WriteAt(r.orig, int64(at)) // best effort, as the sites' bytes
		if mem == io.WriterAt(t.proc) {
			t.rescueUntext(at)
		}
	}
}

// forgetRedirects forgets the re-aimed branches in [start, end), unmapped.
func (j *jumpState) forgetRedirects(start, end uint64) {
	maps.DeleteFunc(j.redirects, func(at uint64, _ redirect) bool { return at >= start && at < end })
}
