package probe

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/probedbg/probe/internal/varint"
)

// The frames a raw capture adds to a recording (docs/recording.md has
// their layout): RawEncoder writes them, RawReader reads them into a
// Decoder.
const (
	RawTablesFrame  = 'T' // RawTables, as JSON: once, before the rest
	RawSiteFrame    = 'S' // a RawSite, as JSON
	RawProbeFrame   = 'P' // a RawProbe, as JSON
	RawNameFrame    = 'N' // a thread's name: its id, then the name
	RawRecordsFrame = 'w' // raw records made at stops, one after another
	RawChunksFrame  = 'C' // a drain pass's records as the rings held them
	RawGoneFrame    = 'G' // a thread gone: its id, the CPU, the time
	RawLostFrame    = 'L' // a thread's ring dropped records: its id
)

// rawBatch is how many bytes of records a frame gathers.
const rawBatch = 64 << 10

// rawSpares bounds the chunks frames' room kept for reuse (Reuse): a
// recording's writer takes what is put every 10 ms (output.Stream
// gathers a trickle), ten or so passes' frames at once.
const rawSpares = 32

// rawCodec is the state records are encoded against, on both sides: the
// previous record's thread, CPU and time, and the values of the previous
// return record and of the previous other one.
type rawCodec struct {
	tid, cpu int
	time     int64
	prev     [2][]uint64 // [0] entries, [1] returns
}

func (c *rawCodec) prevOf(site uint32) *[]uint64 {
	if site == ReturnSite {
		return &c.prev[1]
	}
	return &c.prev[0]
}

// RawEncoder is a RawOutput that encodes into frames, handed to put in
// order; a frame's payload is put's to keep.
type RawEncoder struct {
	put    func(kind byte, payload []byte)
	codec  rawCodec
	batch  []byte // records not yet put
	chunks chunkEncoder
	spare  chan []byte // chunks frames' room given back (Reuse)
}

// NewRawEncoder makes an encoder that hands its frames to put.
func NewRawEncoder(put func(kind byte, payload []byte)) *RawEncoder {
	return &RawEncoder{put: put, spare: make(chan []byte, rawSpares)}
}

// Begin puts the tables first.
func (e *RawEncoder) Begin(t RawTables) { e.putJSON(RawTablesFrame, t) }

func (e *RawEncoder) Site(s RawSite) { e.putJSON(RawSiteFrame, s) }

func (e *RawEncoder) Probe(p RawProbe) { e.putJSON(RawProbeFrame, p) }

func (e *RawEncoder) putJSON(kind byte, v any) {
	js, err := json.Marshal(v)
	if err != nil {
		panic(err) // (plain structs)
	}
	e.Flush()
	e.put(kind, js)
}

func (e *RawEncoder) ThreadName(tid int, comm string) {
	e.Flush()
	e.put(RawNameFrame, append(binary.AppendVarint(nil, int64(tid)), comm...))
}

func (e *RawEncoder) ThreadGone(tid, cpu int, time int64) {
	e.Flush()
	b := binary.AppendVarint(nil, int64(tid))
	b = binary.AppendVarint(b, int64(cpu))
	e.put(RawGoneFrame, binary.AppendVarint(b, time))
}

func (e *RawEncoder) RingLost(tid int) {
	e.Flush()
	e.put(RawLostFrame, binary.AppendVarint(nil, int64(tid)))
}

// Record appends r to the frame being gathered: a head (bit 0: the
// thread follows, bit 1: the CPU, the rest: the count of values), the
// site, the time less the last record's, and each value less the one
// at its place in the last record of its kind (an entry's or a
// return's): stack addresses and return addresses differ little from
// one call to the next.
func (e *RawEncoder) Record(r RawRecord) {
	c := &e.codec
	head := uint64(len(r.Values)) << 2
	if r.Tid != c.tid {
		head |= 1
	}
	if r.CPU != c.cpu {
		head |= 2
	}
	b := binary.AppendUvarint(e.batch, head)
	if head&1 != 0 {
		b = binary.AppendVarint(b, int64(r.Tid))
	}
	if head&2 != 0 {
		b = binary.AppendVarint(b, int64(r.CPU))
	}
	b = binary.AppendUvarint(b, uint64(r.Site))
	b = binary.AppendVarint(b, r.Time-c.time)
	prev := c.prevOf(r.Site)
	for i, v := range r.Values {
		var p uint64
		if i < len(*prev) {
			p = (*prev)[i]
		}
		b = binary.AppendVarint(b, int64(v-p))
	}
	*prev = append((*prev)[:0], r.Values...)
	c.tid, c.cpu, c.time = r.Tid, r.CPU, r.Time
	e.batch = b
	if len(b) >= rawBatch {
		e.Flush()
	}
}

// Flush puts the records gathered.
func (e *RawEncoder) Flush() {
	if len(e.batch) > 0 {
		e.put(RawRecordsFrame, e.batch)
		e.batch = make([]byte, 0, rawBatch+256)
	}
}

// RawReader reads raw capture frames into the Decoder it makes from the
// tables.
type RawReader struct {
	handlers DecodeHandlers
	dec      *Decoder
	codec    rawCodec
	values   []uint64
	pass     chunkHeap // a chunks frame's cursors, reused
}

// NewRawReader reads raw frames whose events and hits go to h.
func NewRawReader(h DecodeHandlers) *RawReader {
	return &RawReader{handlers: h}
}

// IsRawFrame reports whether a frame of kind is a raw capture's.
func IsRawFrame(kind byte) bool {
	switch kind {
	case RawTablesFrame, RawSiteFrame, RawProbeFrame, RawModuleFrame, RawNameFrame, RawRecordsFrame, RawChunksFrame, RawGoneFrame, RawLostFrame:
		return true
	}
	return false
}

var errRawDamaged = errors.New("a raw frame that cannot be read")

// damaged is what a frame that cannot be read on comes to: its end, if
// it was cut short (FrameCut: what came before stands), else an error.
func damaged(cut bool) error {
	if cut {
		return nil
	}
	return errRawDamaged
}

// FrameCut decodes what is whole of a frame of records the file's end
// cut short (the recorder killed as it wrote it): each thread's records
// up to the first the cut reaches. Other frames cut short are of no use.
func (rr *RawReader) FrameCut(kind byte, b []byte) error {
	if rr.dec == nil {
		return nil
	}
	d := varint.Reader{B: b}
	switch kind {
	case RawRecordsFrame:
		return rr.records(&d, true)
	case RawChunksFrame:
		return rr.pass.read(&d, true, rr.dec.named, rr.dec.record)
	}
	return nil
}

// Frame decodes one raw frame.
func (rr *RawReader) Frame(kind byte, b []byte) error {
	if kind == RawTablesFrame {
		if rr.dec != nil {
			return errors.New("raw tables given twice")
		}
		var t RawTables
		if err := json.Unmarshal(b, &t); err != nil {
			return fmt.Errorf("raw tables: %v", err)
		}
		rr.dec = NewDecoder(t, rr.handlers)
		return nil
	}
	if rr.dec == nil {
		return errors.New("raw records before their tables")
	}
	d := varint.Reader{B: b}
	switch kind {
	case RawSiteFrame:
		var s RawSite
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("raw site: %v", err)
		}
		return rr.dec.Site(s)
	case RawProbeFrame:
		var p RawProbe
		if err := json.Unmarshal(b, &p); err != nil {
			return fmt.Errorf("raw probe: %v", err)
		}
		return rr.dec.Probe(p)
	case RawModuleFrame:
		m, more, err := readModule(&d)
		if err != nil {
			return err
		}
		return rr.dec.Module(m, more)
	case RawNameFrame:
		tid := d.Varint()
		rr.dec.ThreadName(int(tid), string(d.B))
	case RawGoneFrame:
		tid, cpu, time := d.Varint(), d.Varint(), d.Varint()
		if d.Bad {
			return errRawDamaged
		}
		rr.dec.ThreadGone(int(tid), int(cpu), time)
	case RawLostFrame:
		rr.dec.RingLost(int(d.Varint()))
	case RawRecordsFrame:
		return rr.records(&d, false)
	case RawChunksFrame:
		return rr.pass.read(&d, false, rr.dec.named, rr.dec.record)
	}
	if d.Bad {
		return errRawDamaged
	}
	return nil
}

// records decodes a frame of records; cut: the frame is cut short, and
// its records up to the cut are all there is.
func (rr *RawReader) records(d *varint.Reader, cut bool) error {
	c := &rr.codec
	for len(d.B) > 0 {
		head := d.Uvarint()
		n := head >> 2
		if n > uint64(len(d.B)) {
			return damaged(cut) // (its values past the end: a value is a byte at the least)
		}
		if head&1 != 0 {
			c.tid = int(d.Varint())
		}
		if head&2 != 0 {
			c.cpu = int(d.Varint())
		}
		site := d.Uvarint()
		c.time += d.Varint()
		if site > 1<<32-1 {
			return errRawDamaged
		}
		prev := c.prevOf(uint32(site))
		rr.values = rr.values[:0]
		for i := range int(n) {
			var p uint64
			if i < len(*prev) {
				p = (*prev)[i]
			}
			rr.values = append(rr.values, p+uint64(d.Varint()))
		}
		if d.Bad {
			return damaged(cut) // (cut: the record the cut reached)
		}
		*prev = append((*prev)[:0], rr.values...)
		if err := rr.dec.Record(RawRecord{Tid: c.tid, CPU: c.cpu, Time: c.time, Site: uint32(site), Values: rr.values}); err != nil {
			return err
		}
	}
	return nil
}

// Stats are the decoder's (Decoder.Stats); zero before any tables.
func (rr *RawReader) Stats() Stats {
	if rr.dec == nil {
		return Stats{}
	}
	return rr.dec.Stats()
}
