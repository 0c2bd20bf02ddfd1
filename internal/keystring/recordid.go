package keystring

import (
	"encoding/binary"
	"math/bits"

	"humongo/internal/recordid"
)

// RecordId suffix format (ours, not MongoDB's: MongoDB's long encoding has no room for negative
// ids, and its binary form relies on the id being a self-delimiting KeyString). Both forms are
// order-preserving (recordid.Compare order: every long before every binary) and end with a tag
// byte from which the suffix length can be found without parsing the key:
//
//	long n >= 0: [0x40+m] [m bytes of n, big-endian] [0x40+m]      m = 1..8, minimal
//	long n < 0:  [0x40-m] [low m bytes of n, big-endian] [0x40-m]  m minimal for ^n
//	binary b:    [0x80] [b with 0x00 escaped as 0x00 0xFF] [0x00] [L] [0x80]
//
// where L is the length of the escaped bytes plus terminator, written right to left in 7-bit
// groups (the byte nearest the end holds the low bits; a set high bit means another group to
// the left), at most 5 bytes. Escaping keeps binary ids ordered bytewise even when one is a
// prefix of another.
const (
	ridLongZero = 0x40
	ridBinary   = 0x80
)

func appendRecordID(dst []byte, id recordid.ID) []byte {
	if !id.IsLong() {
		b := id.Bytes()
		dst = append(dst, ridBinary)
		start := len(dst)
		dst = appendEscaped(dst, b)
		l := len(dst) - start
		var groups [5]byte
		k := 0
		for {
			groups[k] = byte(l & 0x7F)
			l >>= 7
			k++
			if l == 0 || k == len(groups) {
				break
			}
		}
		// Written leftmost group first; every group but the leftmost has the continuation bit.
		for i := k - 1; i >= 0; i-- {
			g := groups[i]
			if i != k-1 {
				g |= 0x80
			}
			dst = append(dst, g)
		}
		return append(dst, ridBinary)
	}
	n := id.Int64()
	var tag byte
	var m int
	if n >= 0 {
		m = max(1, (bits.Len64(uint64(n))+7)/8)
		tag = byte(ridLongZero + m)
	} else {
		m = max(1, (bits.Len64(uint64(^n))+7)/8)
		// n is in [-2^(8m), -1]: its low m bytes and the tag's sign determine it, and within
		// one m they order like n.
		tag = byte(ridLongZero - m)
	}
	dst = append(dst, tag)
	dst = appendUintN(dst, uint64(n), m)
	return append(dst, tag)
}

// DecodeRecordIDAtEnd reads the RecordId suffix of ks and returns it with the length of ks
// without it (the key, through its end marker).
func DecodeRecordIDAtEnd(ks []byte) (recordid.ID, int, error) {
	if len(ks) == 0 {
		return recordid.ID{}, 0, corrupt("no RecordId")
	}
	end := len(ks) - 1
	tag := ks[end]
	switch {
	case tag == ridBinary:
		l, pos := 0, end-1
		for k := 0; ; k++ {
			if pos < 0 || k == 5 {
				return recordid.ID{}, 0, corrupt("bad RecordId length")
			}
			c := ks[pos]
			pos--
			l |= int(c&0x7F) << (7 * k)
			if c&0x80 == 0 {
				if k > 0 && c == 0 {
					// A zero high group: not the minimal encoding the writer makes.
					return recordid.ID{}, 0, corrupt("bad RecordId length")
				}
				break
			}
		}
		// ks[pos+1-l : pos+1] is the escaped id and terminator, preceded by the 0x80 marker.
		start := pos + 1 - l
		if l < 1 || start < 1 || ks[start-1] != ridBinary || ks[pos] != 0 {
			return recordid.ID{}, 0, corrupt("bad binary RecordId")
		}
		esc := ks[start:pos]
		out := make([]byte, 0, len(esc))
		for i := 0; i < len(esc); i++ {
			c := esc[i]
			if c == 0 {
				if i+1 >= len(esc) || esc[i+1] != 0xFF {
					return recordid.ID{}, 0, corrupt("bad escape in binary RecordId")
				}
				i++
			}
			out = append(out, c)
		}
		return recordid.Binary(out), start - 1, nil
	case tag > ridLongZero-9 && tag < ridLongZero+9 && tag != ridLongZero:
		neg := tag < ridLongZero
		m := int(tag) - ridLongZero
		if neg {
			m = -m
		}
		start := end - m - 1
		if start < 0 || ks[start] != tag {
			return recordid.ID{}, 0, corrupt("bad long RecordId")
		}
		v := binary.BigEndian.Uint64(append(make([]byte, 8-m, 8), ks[start+1:end]...))
		if neg && m < 8 {
			v |= ^uint64(0) << (8 * m) // sign-extend
		}
		n := int64(v)
		if (n < 0) != neg {
			return recordid.ID{}, 0, corrupt("long RecordId sign does not match its tag")
		}
		return recordid.Long(n), start, nil
	}
	return recordid.ID{}, 0, corrupt("unknown RecordId tag")
}
