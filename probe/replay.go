package probe

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/internal/fault"
	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/tracee"
)

// The replay of a record: a record's values become the Hit its probes'
// handlers see, as a stop would have made it (registers, the stack words
// and memory the stub copied), and the function tracer's call stacks
// take its entry or return.

// stackWords serves reads of the words recorded at sp, and of the
// memory the stub copied (snippets).
type stackWords struct {
	sp     uint64
	words  []uint64
	snips  []snippet
	nsnips int // in use
}

// snippet is memory a stub copied: got of want bytes at addr (fewer: the
// copy faulted there). A string copied whole to its bound was cut there:
// it reads on as NULs.
type snippet struct {
	addr      uint64
	data      []byte
	got, want int
	str       bool
}

// fromSnippet serves a read at addr from the snippets, if one has it:
// from the bytes a snippet copied; or, with tails, past the end of a
// string copied whole to its bound, which reads on as NULs up to the
// longest string a fetch reads (only that: another read there is of
// other memory, not recorded).
func (s *stackWords) fromSnippet(p []byte, addr uint64, tails bool) (int, bool) {
	for i := range s.snips[:s.nsnips] {
		sn := &s.snips[i]
		cut := sn.str && sn.got == sn.want
		end := sn.addr + uint64(sn.want)
		if tails && cut {
			end = sn.addr + fetch.MaxStringSize
		}
		if addr < sn.addr || addr >= end {
			continue
		}
		n := 0
		for ; n < len(p); n++ {
			switch o := addr - sn.addr + uint64(n); {
			case o < uint64(sn.got):
				p[n] = sn.data[o]
			case cut:
				p[n] = 0
			default:
				return n, true
			}
		}
		return n, true
	}
	return 0, false
}

// ReadAt reads what the stub copied: the memory a read copied, the
// words at sp, or the NULs past a string cut at its bound, in that order.
func (s *stackWords) ReadAt(p []byte, addr int64) (int, error) {
	if n, ok := s.fromSnippet(p, uint64(addr), false); ok {
		return s.snipped(p, addr, n)
	}
	if n, err := s.fromStack(p, addr); n > 0 || s.tailless(uint64(addr)) {
		return n, err
	}
	n, _ := s.fromSnippet(p, uint64(addr), true)
	return s.snipped(p, addr, n)
}

// snipped is ReadAt's answer for n bytes of p read from a snippet.
func (s *stackWords) snipped(p []byte, addr int64, n int) (int, error) {
	if n < len(p) {
		return n, fmt.Errorf("%#x: the copy faulted", uint64(addr)+uint64(n))
	}
	return n, nil
}

// tailless reports whether no string's NUL tail covers addr.
func (s *stackWords) tailless(addr uint64) bool {
	_, ok := s.fromSnippet(nil, addr, true)
	return !ok
}

// fromStack reads the words recorded at sp.
func (s *stackWords) fromStack(p []byte, addr int64) (int, error) {
	n := 0
	for n < len(p) {
		at := uint64(addr) + uint64(n)
		i := (at - s.sp) / 8
		if at < s.sp || i >= uint64(len(s.words)) {
			break
		}
		p[n] = byte(s.words[i] >> (8 * ((at - s.sp) % 8)))
		n++
	}
	if n < len(p) {
		return n, fmt.Errorf("%#x: not recorded", uint64(addr)+uint64(n))
	}
	return n, nil
}

func (s *stackWords) WriteAt(p []byte, addr int64) (int, error) {
	return 0, fmt.Errorf("%#x: a record is read-only", addr)
}

// regWords is r as words, the one at byte offset off word off/8: as a
// stub records registers.
func regWords(r *unix.PtraceRegs) *[unsafe.Sizeof(unix.PtraceRegs{}) / 8]uint64 {
	return (*[unsafe.Sizeof(unix.PtraceRegs{}) / 8]uint64)(unsafe.Pointer(r))
}

// deliverRecord runs the handlers of one record's probes.
func (t *Tracer) deliverRecord(rec *ring.Record) {
	in := t.inproc
	if in.quiet[rec.Tid] {
		// A vfork child's hit: not reported, as the stopping path
		// does not report it (and uprobes do not).
		return
	}
	if rec.Site == codegen.ReturnRecord {
		in.regs = unix.PtraceRegs{}
		in.stack.sp, in.stack.words, in.stack.nsnips = 0, nil, 0
		t.replayReturn(rec, t.replayHit(rec))
		return
	}
	rs := in.sites[rec.Site]
	if rs == nil {
		return
	}
	in.regs = unix.PtraceRegs{}
	in.regs.SetPC(rs.site.addr)
	words := regWords(&in.regs)
	for i, off := range rs.code.Regs {
		if i < len(rec.Values) {
			words[off/8] = rec.Values[i]
		}
	}
	hooked, ok := in.stack.load(rec.Values, rs.code)
	if !ok {
		return
	}
	in.stack.sp = tracee.SP(&in.regs)
	hit := t.replayHit(rec)
	for _, p := range rs.site.probes {
		if !p.enabled.Load() {
			continue
		}
		p.hits.Add(1)
		if args := p.argsAt(rs.site); args != nil {
			in.fields = args.Fetch(t.envFor(hit), in.fields[:0])
			hit.Fields = in.fields
			if !args.Keep(in.fields) {
				continue
			}
		} else {
			hit.Fields = nil
		}
		if p.handler.Pre != nil {
			fault.Point("entry")
			hit.Probe, hit.Where = p, cmp.Or(p.shownAt, rs.site.where)
			p.handler.Pre(hit)
		}
	}
	hit.Fields = nil
	s := rs.site
	switch traced, returns := t.cFunc(s); {
	case traced && !returns:
		if caller, ok := recordedCaller(&in.regs, in.stack.words); ok {
			t.traceEntryOnly(&in.regs, s, hit, caller)
		}
	case rs.code.Hook:
		if ret, ok := recordedCaller(&in.regs, in.stack.words); ok {
			t.replayEnter(s, hit, ret, hooked)
		}
	}
}

// load takes a record's values after its registers: the stack words,
// whether the return was hooked, the memory copied. false: the record is
// short of what stub c records.
func (s *stackWords) load(vals []uint64, c *codegen.RecordStub) (hooked, ok bool) {
	at := len(c.Regs)
	if len(vals) < at+c.StackWords {
		return false, false
	}
	s.words = vals[at : at+c.StackWords]
	at += c.StackWords
	if c.Hook {
		if len(vals) <= at {
			return false, false
		}
		hooked = vals[at] == 1
		at++
	}
	s.nsnips = 0
	for _, r := range c.Reads {
		if len(vals) < at+r.Words() {
			return false, false
		}
		if s.nsnips == len(s.snips) {
			s.snips = append(s.snips, snippet{data: make([]byte, codegen.MemReadMax+8)})
		}
		sn := &s.snips[s.nsnips]
		s.nsnips++
		sn.addr, sn.want, sn.str = vals[at], r.Len, r.Len == codegen.MemReadMax
		sn.got = max(min(int(int64(vals[at+1])), r.Len), 0)
		for w, v := range vals[at+2 : at+r.Words()] {
			binary.LittleEndian.PutUint64(sn.data[8*w:], v)
		}
		at += r.Words()
	}
	return hooked, true
}

// recordTime is rec's time: its stamp on the tracer's clock, or, raw
// records decoded, the time they were given with.
func (t *Tracer) recordTime(rec *ring.Record) int64 {
	if t.decoding != nil {
		return int64(rec.TSC)
	}
	return t.inproc.clock.Time(rec.TSC)
}

// replayHit is the hit of a record, its registers and stack words in
// in.regs and in.stack.
func (t *Tracer) replayHit(rec *ring.Record) *Hit {
	in := t.inproc
	in.hit = Hit{Pid: t.pid, Tid: rec.Tid, Comm: t.threadComm(rec.Tid), Time: t.recordTime(rec), CPU: rec.CPU, regs: &in.regs, Mem: &in.stack, tracer: t}
	switch {
	case rec.CPU != ring.UnknownCPU:
	case t.decoding != nil:
		// A recording's, its chunk knowing none either (a thread without
		// an rseq area, never placed): no process to ask (before, probe
		// report died of a nil pointer here; found by FuzzRawFrames).
		in.hit.CPU = 0
	default:
		in.hit.CPU = t.cpuOf(rec.Tid) // no rseq area (arm64): where the thread runs now
	}
	return &in.hit
}
