// Package recordid defines RecordId, the key of a record in a record store (execution spec:
// "Collection and Index to Table relationship", "Clustered RecordIds").
//
// A RecordId is either a 64-bit integer (ordinary collections, where ids are allocated
// increasingly from 1, and the oplog, where the id is the entry's timestamp) or a byte string
// (clustered collections, where it is the KeyString of the cluster key). Both kinds have an
// order-preserving storage key: Key() compares with bytes.Compare exactly as Compare does.
package recordid

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
)

// ID is a RecordId. The zero value is the null RecordId (IsNull), which never names a record.
type ID struct {
	n   int64
	b   string // non-empty for binary (clustered) ids
	bin bool
}

// Long returns the integer RecordId n.
func Long(n int64) ID { return ID{n: n} }

// Binary returns the binary RecordId with bytes b (copied).
func Binary(b []byte) ID { return ID{b: string(b), bin: true} }

// IsNull reports whether id is the null RecordId.
func (id ID) IsNull() bool { return !id.bin && id.n == 0 }

// IsLong reports whether id is an integer RecordId.
func (id ID) IsLong() bool { return !id.bin }

// Int64 returns the integer value of a long RecordId (0 for binary ones).
func (id ID) Int64() int64 { return id.n }

// Bytes returns the bytes of a binary RecordId (nil for long ones).
func (id ID) Bytes() []byte {
	if !id.bin {
		return nil
	}
	return []byte(id.b)
}

// Compare orders ids: all long ids before all binary ids; longs numerically, binaries bytewise.
func Compare(a, b ID) int {
	switch {
	case a.bin != b.bin:
		if a.bin {
			return 1
		}
		return -1
	case a.bin:
		return bytes.Compare([]byte(a.b), []byte(b.b))
	case a.n < b.n:
		return -1
	case a.n > b.n:
		return 1
	}
	return 0
}

// Key returns the order-preserving storage key of id: a kind byte (0x10 long, 0x20 binary, so
// every long key sorts before every binary key, as in Compare) then, for longs, 8 bytes
// big-endian with the sign bit flipped, and for binaries the bytes themselves.
func (id ID) Key() []byte { return id.AppendKey(make([]byte, 0, 9)) }

const (
	kindLong   = 0x10
	kindBinary = 0x20
)

// AppendKey appends Key() to dst.
func (id ID) AppendKey(dst []byte) []byte {
	if id.bin {
		dst = append(dst, kindBinary)
		return append(dst, id.b...)
	}
	dst = append(dst, kindLong)
	return binary.BigEndian.AppendUint64(dst, uint64(id.n)^(1<<63))
}

// FromKey decodes a storage key made by Key.
func FromKey(k []byte) (ID, error) {
	switch {
	case len(k) == 9 && k[0] == kindLong:
		return Long(int64(binary.BigEndian.Uint64(k[1:]) ^ (1 << 63))), nil
	case len(k) >= 1 && k[0] == kindBinary:
		return Binary(k[1:]), nil
	}
	return ID{}, fmt.Errorf("recordid: malformed key %x", k)
}

func (id ID) String() string {
	if id.bin {
		return fmt.Sprintf("RecordId(%x)", id.b)
	}
	return "RecordId(" + strconv.FormatInt(id.n, 10) + ")"
}
