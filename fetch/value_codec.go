package fetch

import (
	"encoding/binary"
	"errors"
)

// MarshalBinary encodes a Value for a recorded trace (encoding/gob uses
// it), so that a report prints it exactly as the live trace did.
func (v Value) MarshalBinary() ([]byte, error) {
	return v.appendBinary(nil), nil
}

// AppendBinary appends MarshalBinary's encoding of v to dst.
func (v Value) AppendBinary(dst []byte) []byte { return v.appendBinary(dst) }

// DecodeBinary decodes a value AppendBinary encoded at the start of b,
// and returns what follows it.
func (v *Value) DecodeBinary(b []byte) ([]byte, error) { return v.decode(b, 0) }

func (v Value) appendBinary(dst []byte) []byte {
	dst = append(dst, byte(v.typ), v.n)
	dst = binary.AppendUvarint(dst, v.bits)
	dst = binary.AppendUvarint(dst, v.fault)
	dst = binary.AppendUvarint(dst, uint64(len(v.str)))
	dst = append(dst, v.str...)
	dst = binary.AppendUvarint(dst, uint64(len(v.elems)))
	for i := range v.elems {
		dst = v.elems[i].appendBinary(dst)
	}
	return dst
}

var errBadValue = errors.New("probe: bad encoded value")

// UnmarshalBinary decodes what MarshalBinary encoded.
func (v *Value) UnmarshalBinary(b []byte) error {
	rest, err := v.decode(b, 0)
	if err == nil && len(rest) != 0 {
		err = errBadValue
	}
	return err
}

func (v *Value) decode(b []byte, depth int) ([]byte, error) {
	if len(b) < 2 || depth > 1 {
		return nil, errBadValue
	}
	*v = Value{typ: Type(b[0]), n: b[1]}
	b = b[2:]
	var strLen, elems uint64
	for _, p := range []*uint64{&v.bits, &v.fault, &strLen} {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errBadValue
		}
		*p, b = x, b[n:]
	}
	if strLen > uint64(len(b)) {
		return nil, errBadValue
	}
	v.str, b = string(b[:strLen]), b[strLen:]
	elems, n := binary.Uvarint(b)
	if n <= 0 || elems > MaxArrayLen {
		return nil, errBadValue
	}
	b = b[n:]
	if elems > 0 {
		v.elems = make([]Value, elems)
		for i := range v.elems {
			var err error
			if b, err = v.elems[i].decode(b, depth+1); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}
