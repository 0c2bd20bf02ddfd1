package storage

// Every on-disk key and value format of the storage engine is defined in this file (STYLE.md
// habit 4). doc.go explains the layout and why it was chosen.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"humongo/internal/optime"

	"github.com/cockroachdb/pebble/v2"
)

const (
	// formatVersion is stored under metaFormatKey and checked at Open. Bump it on any change
	// to the encodings below.
	formatVersion = 1

	// prefixLen is the length of an ident's numeric key prefix.
	prefixLen = 4
	// metaPrefixID is reserved for the engine's own metadata (bare keys, no versions).
	metaPrefixID = 0
	// firstIdentPrefixID is the first id handed to an ident.
	firstIdentPrefixID = 1

	// versionSuffixLen is the length of a version suffix: 8-byte timestamp + length byte.
	versionSuffixLen = 9

	// Value headers: the first byte of every versioned value.
	valueHeaderPut       = 0x01
	valueHeaderTombstone = 0x02
)

// Metadata keys (under metaPrefixID). Names are short ASCII tags.
var (
	metaFormatKey = metaKey("format")
	metaIdentTag  = "ident/"  // + ident name -> prefix id (4) ‖ flags (1)
	metaCountsTag = "counts/" // + prefix id (4) -> records (8) ‖ dataSize (8)
	metaStableKey = metaKey("stable")
	metaOldestKey = metaKey("oldest")
	metaLeaseKey  = metaKey("tslease")  // seconds bound on every timestamp ever handed out
	metaNextIDKey = metaKey("nextid")   // next ident prefix id
	metaCleanKey  = metaKey("clean")    // present only between a clean Close and the next Open
	metaIdentSeq  = metaKey("identseq") // counter for NewIdentName
)

// Ident flags, persisted with the ident.
const (
	identFlagUntimestamped = 1 << 0
	identFlagOplog         = 1 << 1
)

// appendPrefix appends the 4-byte big-endian ident prefix.
func appendPrefix(dst []byte, id uint32) []byte {
	return binary.BigEndian.AppendUint32(dst, id)
}

// appendBareKey appends the unversioned engine key for (id, user key): prefix ‖ key ‖ 0x00.
// A bare key sorts before every version of the same user key (empty suffix sorts first), so
// it is the natural seek key for "the newest version of key".
func appendBareKey(dst []byte, id uint32, key []byte) []byte {
	dst = appendPrefix(dst, id)
	dst = append(dst, key...)
	return append(dst, 0)
}

// appendVersionedKey appends prefix ‖ key ‖ 0x00 ‖ ts(8, big-endian) ‖ 0x09.
func appendVersionedKey(dst []byte, id uint32, key []byte, ts optime.Timestamp) []byte {
	dst = appendBareKey(dst, id, key)
	return appendVersionSuffix(dst, ts)
}

func appendVersionSuffix(dst []byte, ts optime.Timestamp) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(ts))
	return append(dst, versionSuffixLen)
}

// identBounds returns the engine key range [lo, hi) holding every key of ident id.
func identBounds(id uint32) (lo, hi []byte) {
	lo = appendBareKey(nil, id, nil)
	hi = appendBareKey(nil, id+1, nil)
	return lo, hi
}

func metaKey(name string) []byte { return appendBareKey(nil, metaPrefixID, []byte(name)) }

// splitKey returns the length of k's MVCC prefix (prefix id ‖ user key ‖ 0x00). Malformed keys
// are treated as bare so that the comparer never panics; decodeVersionedKey reports them.
func splitKey(k []byte) int {
	n := len(k)
	if n == 0 {
		return 0
	}
	if k[n-1] == versionSuffixLen && n >= versionSuffixLen+1+prefixLen {
		return n - versionSuffixLen
	}
	return n
}

// compareSuffixes orders version suffixes: empty first, then timestamps descending (newest
// version of a key first). Malformed suffixes compare bytewise after the valid ones.
func compareSuffixes(a, b []byte) int {
	switch {
	case len(a) == 0 && len(b) == 0:
		return 0
	case len(a) == 0:
		return -1
	case len(b) == 0:
		return 1
	}
	if len(a) == versionSuffixLen && len(b) == versionSuffixLen {
		// Descending timestamp order: compare b to a.
		return bytes.Compare(b[:8], a[:8])
	}
	return bytes.Compare(a, b)
}

func compareKeys(a, b []byte) int {
	ap, bp := splitKey(a), splitKey(b)
	if c := bytes.Compare(a[:ap], b[:bp]); c != 0 {
		return c
	}
	return compareSuffixes(a[ap:], b[bp:])
}

// mvccComparer is the Pebble comparer of the engine. Its Name is persisted by Pebble: a DB
// created with another comparer refuses to open.
var mvccComparer = &pebble.Comparer{
	Compare: compareKeys,
	Equal:   func(a, b []byte) bool { return compareKeys(a, b) == 0 },
	AbbreviatedKey: func(key []byte) uint64 {
		key = key[:splitKey(key)]
		var buf [8]byte
		copy(buf[:], key)
		return binary.BigEndian.Uint64(buf[:])
	},
	// Separator and Successor may return their input unchanged (always correct); shortening
	// index-block keys is not worth the risk of breaking the prefix/suffix invariants.
	Separator: func(dst, a, _ []byte) []byte { return append(dst, a...) },
	Successor: func(dst, a []byte) []byte { return append(dst, a...) },
	// The smallest prefix after a (a prefix, ‖0x00-terminated) is a ‖ 0x00: a bare key whose
	// user key is one zero byte longer.
	ImmediateSuccessor: func(dst, a []byte) []byte {
		return append(append(dst, a...), 0)
	},
	Split:                splitKey,
	ComparePointSuffixes: compareSuffixes,
	CompareRangeSuffixes: compareSuffixes,
	FormatKey: func(key []byte) fmt.Formatter {
		return keyFormatter(key)
	},
	Name: "humongo.mvcc.v1",
}

type keyFormatter []byte

func (k keyFormatter) Format(s fmt.State, _ rune) {
	id, uk, ts, versioned, err := decodeEngineKey(k)
	switch {
	case err != nil:
		fmt.Fprintf(s, "corrupt(%x)", []byte(k))
	case versioned:
		fmt.Fprintf(s, "%d/%x@%d.%d", id, uk, ts.Secs(), ts.Inc())
	default:
		fmt.Fprintf(s, "%d/%x", id, uk)
	}
}

// decodeEngineKey splits an engine key into its parts. userKey aliases k.
func decodeEngineKey(k []byte) (id uint32, userKey []byte, ts optime.Timestamp, versioned bool, err error) {
	p := splitKey(k)
	if p < prefixLen+1 || k[p-1] != 0 {
		return 0, nil, 0, false, fmt.Errorf("%w: malformed engine key %x", ErrCorrupt, k)
	}
	id = binary.BigEndian.Uint32(k)
	userKey = k[prefixLen : p-1]
	if p == len(k) {
		return id, userKey, 0, false, nil
	}
	ts = optime.Timestamp(binary.BigEndian.Uint64(k[p:]))
	return id, userKey, ts, true, nil
}

// versionTs returns the timestamp of a versioned key whose prefix length is p.
func versionTs(k []byte, p int) optime.Timestamp {
	return optime.Timestamp(binary.BigEndian.Uint64(k[p:]))
}

// decodeValue strips the header of a versioned value. tombstone is true for deletions.
func decodeValue(v []byte) (payload []byte, tombstone bool, err error) {
	if len(v) == 0 {
		return nil, false, fmt.Errorf("%w: empty value", ErrCorrupt)
	}
	switch v[0] {
	case valueHeaderPut:
		return v[1:], false, nil
	case valueHeaderTombstone:
		if len(v) != 1 {
			return nil, false, fmt.Errorf("%w: tombstone with payload", ErrCorrupt)
		}
		return nil, true, nil
	}
	return nil, false, fmt.Errorf("%w: bad value header %#x", ErrCorrupt, v[0])
}

// identRecord is the metadata value of an ident.
type identRecord struct {
	id    uint32
	flags byte
}

func (r identRecord) encode() []byte {
	b := appendPrefix(make([]byte, 0, 5), r.id)
	return append(b, r.flags)
}

func decodeIdentRecord(v []byte) (identRecord, error) {
	if len(v) != 5 {
		return identRecord{}, fmt.Errorf("%w: ident record of %d bytes", ErrCorrupt, len(v))
	}
	return identRecord{id: binary.BigEndian.Uint32(v), flags: v[4]}, nil
}

func encodeUint64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func decodeUint64(v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: expected 8 bytes, got %d", ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
