package ring

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// The table of readable memory the stubs copy from themselves
// (MapsOff, layout.go): the tracer writes it from /proc/PID/maps, and
// notes with a TSC that it still looks (Beat).

// ReadableRanges is the memory of process pid that can be read, from its
// /proc/PID/maps: each readable mapping, neighbours joined, sorted; not
// the kernel's own pages ([vvar], [vsyscall]), which the stubs do not
// copy from.
func ReadableRanges(pid int) ([][2]uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][2]uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[1][0] != 'r' {
			continue
		}
		if len(fields) >= 6 && strings.HasPrefix(fields[5], "[v") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			continue
		}
		if n := len(out); n > 0 && out[n-1][1] == start {
			out[n-1][1] = end
			continue
		}
		out = append(out, [2]uint64{start, end})
	}
	return out, sc.Err()
}

// SetReadable writes ranges as the table; with more than it holds, an
// empty table (every read by a system call).
func (r *Rings) SetReadable(ranges [][2]uint64) {
	if len(ranges) > MapsMax {
		ranges = nil
	}
	gen := r.word(MapGenOff)
	atomic.AddUint64(gen, 1) // odd: being written
	for i, rg := range ranges {
		at := uint64(MapsOff + 16*i)
		atomic.StoreUint64(r.word(at), rg[0])
		atomic.StoreUint64(r.word(at+8), rg[1])
	}
	atomic.StoreUint64(r.word(MapCountOff), uint64(len(ranges)))
	atomic.AddUint64(gen, 1)
}

// Beat notes that the tracer still looks, now; a stub trusts the table
// for maxAge TSC ticks from then.
func (r *Rings) Beat(maxAge uint64) {
	atomic.StoreUint64(r.word(MapBeatMaxOff), maxAge)
	atomic.StoreUint64(r.word(MapBeatOff), rdtsc())
}

// StopBeating makes every stub copy by system call from now on: the
// tracer is about to stop looking (detach).
func (r *Rings) StopBeating() {
	atomic.StoreUint64(r.word(MapBeatOff), 0)
	atomic.StoreUint64(r.word(MapBeatMaxOff), 0)
}
