package bsonutil

import (
	"bytes"
	"cmp"
	"encoding/binary"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// MaxDepth bounds the nesting Compare follows. MongoDB accepts 200 levels of user nesting;
// internal wrappers (oplog entries, command envelopes) add a few more. Deeper input is treated as
// malformed rather than risking unbounded recursion on hostile bytes.
const MaxDepth = 1000

// Canonical type ranks, as in MongoDB's canonicalizeBSONType: undefined (0) sorts before null
// (5). EOO, which a zero bsoncore.Value uses to mean "missing", shares null's rank because
// MongoDB sort keys and index keys treat a missing field as null (see the package comment).
const (
	rankMinKey     = -1
	rankUndefined  = 0
	rankNull       = 5
	rankNumber     = 10
	rankString     = 15
	rankObject     = 20
	rankArray      = 25
	rankBinary     = 30
	rankObjectID   = 35
	rankBool       = 40
	rankDate       = 45
	rankTimestamp  = 47
	rankRegex      = 50
	rankDBPointer  = 55
	rankCode       = 60
	rankCodeWScope = 65
	rankMaxKey     = 127
	// RankInvalid is what CanonicalTypeOrder returns for a byte that is not a BSON type; it is
	// below every valid rank, like MongoDB's canonicalizeBSONTypeUnsafeLookup.
	RankInvalid = -128
)

// canonicalRank is indexed by type byte; RankInvalid marks invalid types. MinKey (0xFF) is handled
// by the table too since the index is a byte.
var canonicalRank = func() (t [256]int8) {
	for i := range t {
		t[i] = RankInvalid
	}
	t[0x00] = rankNull // EOO: a zero bsoncore.Value means "missing", which sorts as null.
	t[bsoncore.TypeUndefined] = rankUndefined
	t[bsoncore.TypeNull] = rankNull
	t[bsoncore.TypeDouble] = rankNumber
	t[bsoncore.TypeInt32] = rankNumber
	t[bsoncore.TypeInt64] = rankNumber
	t[bsoncore.TypeDecimal128] = rankNumber
	t[bsoncore.TypeString] = rankString
	t[bsoncore.TypeSymbol] = rankString
	t[bsoncore.TypeEmbeddedDocument] = rankObject
	t[bsoncore.TypeArray] = rankArray
	t[bsoncore.TypeBinary] = rankBinary
	t[bsoncore.TypeObjectID] = rankObjectID
	t[bsoncore.TypeBoolean] = rankBool
	t[bsoncore.TypeDateTime] = rankDate
	t[bsoncore.TypeTimestamp] = rankTimestamp
	t[bsoncore.TypeRegex] = rankRegex
	t[bsoncore.TypeDBPointer] = rankDBPointer
	t[bsoncore.TypeJavaScript] = rankCode
	t[bsoncore.TypeCodeWithScope] = rankCodeWScope
	t[bsoncore.TypeMinKey] = rankMinKey
	t[bsoncore.TypeMaxKey] = rankMaxKey
	return t
}()

// CanonicalTypeOrder returns the rank of t in the canonical BSON order: values of different
// ranks compare by rank alone, values of equal rank compare by value. Ranks match MongoDB's
// canonicalizeBSONType (MinKey -1, undefined 0, null 5, numbers 10, ..., MaxKey 127), except
// that EOO ("missing") shares null's rank 5. Invalid types get RankInvalid.
func CanonicalTypeOrder(t bsoncore.Type) int { return int(canonicalRank[byte(t)]) }

// fault records which operand of a comparison was found malformed.
type fault uint8

const (
	faultA fault = 1 << iota
	faultB
)

// Compare returns -1, 0 or 1 as a sorts before, equal to, or after b in MongoDB's canonical
// BSON order (BSONElement::woCompare without field names, no collation). It never panics;
// malformed input is ordered as described in the package comment.
func Compare(a, b bsoncore.Value) int {
	r, f := compareValue(a.Type, a.Data, b.Type, b.Data, 0, nil)
	return resolve(r, f, a.Type, a.Data, b.Type, b.Data)
}

// StringComparer compares strings under a collation (collation.Collator implements it). It
// must not retain its arguments and must be safe for concurrent use.
type StringComparer interface {
	CompareStrings(a, b []byte) int
}

// CompareWithCollator is Compare where strings and symbols, including those nested in
// documents and arrays, compare under sc (BSONElement::woCompare with a StringData
// comparator). A nil sc is the simple (binary) collation.
func CompareWithCollator(a, b bsoncore.Value, sc StringComparer) int {
	r, f := compareValue(a.Type, a.Data, b.Type, b.Data, 0, sc)
	return resolve(r, f, a.Type, a.Data, b.Type, b.Data)
}

// CompareDocumentsWithCollator is CompareDocuments under sc (nil: binary).
func CompareDocumentsWithCollator(a, b bsoncore.Document, sc StringComparer) int {
	r, f := compareDocs(a, b, true, 0, sc)
	return resolve(r, f, bsoncore.TypeEmbeddedDocument, a, bsoncore.TypeEmbeddedDocument, b)
}

// Equal reports whether Compare(a, b) == 0: the same canonical type and the same value, so
// Int32(1), Int64(1), Double(1.0) and Decimal128("1.00") are all equal, and so are string and
// symbol "x".
func Equal(a, b bsoncore.Value) bool { return Compare(a, b) == 0 }

// CompareErr is Compare for input that may be malformed: it returns an InvalidBSON error if the
// comparison reached a malformed part of either value. A nil error means the result is the
// canonical order (parts never examined are not validated).
func CompareErr(a, b bsoncore.Value) (int, error) {
	r, f := compareValue(a.Type, a.Data, b.Type, b.Data, 0, nil)
	if f != 0 {
		return resolve(r, f, a.Type, a.Data, b.Type, b.Data), faultErr(f)
	}
	return r, nil
}

// CompareDocuments compares two documents field by field, considering field names
// (BSONObj::woCompare with an empty ordering): for each position, canonical type, then field
// name, then value; a document that is a prefix of the other sorts first.
func CompareDocuments(a, b bsoncore.Document) int {
	r, f := compareDocs(a, b, true, 0, nil)
	return resolve(r, f, bsoncore.TypeEmbeddedDocument, a, bsoncore.TypeEmbeddedDocument, b)
}

// CompareDocumentsErr is CompareDocuments that reports malformed input like CompareErr.
func CompareDocumentsErr(a, b bsoncore.Document) (int, error) {
	r, f := compareDocs(a, b, true, 0, nil)
	if f != 0 {
		return resolve(r, f, bsoncore.TypeEmbeddedDocument, a, bsoncore.TypeEmbeddedDocument, b), faultErr(f)
	}
	return r, nil
}

func faultErr(f fault) error {
	switch f {
	case faultA:
		return mongoerr.New(mongoerr.InvalidBSON, "malformed BSON in left operand of comparison")
	case faultB:
		return mongoerr.New(mongoerr.InvalidBSON, "malformed BSON in right operand of comparison")
	default:
		return mongoerr.New(mongoerr.InvalidBSON, "malformed BSON in both operands of comparison")
	}
}

// resolve applies the malformed-input rule: the malformed side sorts first; if both are
// malformed, order by raw bytes.
func resolve(r int, f fault, at bsoncore.Type, ad []byte, bt bsoncore.Type, bd []byte) int {
	switch f {
	case 0:
		return r
	case faultA:
		return -1
	case faultB:
		return 1
	}
	if c := cmp.Compare(at, bt); c != 0 {
		return c
	}
	return bytes.Compare(ad, bd)
}

// sideFault returns the fault bits for "a ok" / "b ok".
func sideFault(okA, okB bool) fault {
	var f fault
	if !okA {
		f |= faultA
	}
	if !okB {
		f |= faultB
	}
	return f
}

// compareValue compares two values given as type and data. Data may extend past the value (it
// is bounds-checked, trailing bytes are ignored).
func compareValue(at bsoncore.Type, ad []byte, bt bsoncore.Type, bd []byte, depth int, sc StringComparer) (int, fault) {
	ra, rb := canonicalRank[byte(at)], canonicalRank[byte(bt)]
	if f := sideFault(ra != RankInvalid, rb != RankInvalid); f != 0 {
		return 0, f
	}
	if ra != rb {
		return cmp.Compare(ra, rb), 0
	}
	if depth > MaxDepth {
		return 0, faultA | faultB
	}
	switch ra {
	case rankMinKey, rankMaxKey, rankNull, rankUndefined:
		return 0, 0
	case rankNumber:
		return compareNumbers(at, ad, bt, bd)
	case rankString, rankCode:
		sa, okA := readStr(ad)
		sb, okB := readStr(bd)
		if f := sideFault(okA, okB); f != 0 {
			return 0, f
		}
		if sc != nil && ra == rankString {
			// Strings and symbols follow the collation; JavaScript code never does.
			return sc.CompareStrings(sa, sb), 0
		}
		return bytes.Compare(sa, sb), 0
	case rankObject:
		return compareDocs(ad, bd, true, depth+1, sc)
	case rankArray:
		return compareDocs(ad, bd, false, depth+1, sc)
	case rankBinary:
		// MongoDB: length, then subtype and bytes together in one memcmp.
		na, nb := valueLen(at, ad), valueLen(bt, bd)
		if f := sideFault(na >= 0, nb >= 0); f != 0 {
			return 0, f
		}
		if na != nb {
			return cmp.Compare(na, nb), 0
		}
		return bytes.Compare(ad[4:na], bd[4:nb]), 0
	case rankObjectID:
		if f := sideFault(len(ad) >= 12, len(bd) >= 12); f != 0 {
			return 0, f
		}
		return bytes.Compare(ad[:12], bd[:12]), 0
	case rankBool:
		if f := sideFault(len(ad) >= 1, len(bd) >= 1); f != 0 {
			return 0, f
		}
		// Any non-zero byte is true, as in BSONElement::boolean.
		return cmp.Compare(b2i(ad[0] != 0), b2i(bd[0] != 0)), 0
	case rankDate:
		if f := sideFault(len(ad) >= 8, len(bd) >= 8); f != 0 {
			return 0, f
		}
		return cmp.Compare(int64(binary.LittleEndian.Uint64(ad)), int64(binary.LittleEndian.Uint64(bd))), 0
	case rankTimestamp:
		// Stored as increment (low 32 bits) then seconds (high 32 bits): one unsigned 64-bit
		// little-endian integer orders by (seconds, increment).
		if f := sideFault(len(ad) >= 8, len(bd) >= 8); f != 0 {
			return 0, f
		}
		return cmp.Compare(binary.LittleEndian.Uint64(ad), binary.LittleEndian.Uint64(bd)), 0
	case rankRegex:
		na, nb := valueLen(at, ad), valueLen(bt, bd)
		if f := sideFault(na >= 0, nb >= 0); f != 0 {
			return 0, f
		}
		// valueLen found both terminators, so each value is pattern NUL flags NUL.
		ia, ib := bytes.IndexByte(ad, 0), bytes.IndexByte(bd, 0)
		pa, fa := ad[:ia], ad[ia+1:na-1]
		pb, fb := bd[:ib], bd[ib+1:nb-1]
		if c := bytes.Compare(pa, pb); c != 0 {
			return c, 0
		}
		return bytes.Compare(fa, fb), 0
	case rankDBPointer:
		// MongoDB: value size, then memcmp of the whole value.
		na, nb := valueLen(at, ad), valueLen(bt, bd)
		if f := sideFault(na >= 0, nb >= 0); f != 0 {
			return 0, f
		}
		if na != nb {
			return cmp.Compare(na, nb), 0
		}
		return bytes.Compare(ad[:na], bd[:nb]), 0
	case rankCodeWScope:
		ca, sa, okA := splitCodeWScope(ad)
		cb, sb, okB := splitCodeWScope(bd)
		if f := sideFault(okA, okB); f != 0 {
			return 0, f
		}
		if c := bytes.Compare(ca, cb); c != 0 {
			return c, 0
		}
		return compareDocs(sa, sb, true, depth+1, nil)
	}
	// Unreachable: every valid rank is handled above.
	return 0, faultA | faultB
}

// splitCodeWScope returns the code string and the scope document of a code-with-scope value.
func splitCodeWScope(d []byte) (code, scope []byte, ok bool) {
	n := valueLen(bsoncore.TypeCodeWithScope, d)
	if n < 0 {
		return nil, nil, false
	}
	d = d[4:n]
	code, ok = readStr(d)
	if !ok {
		return nil, nil, false
	}
	scope = d[4+len(code)+1:]
	return code, scope, true
}

// compareDocs compares two raw documents (or arrays when names is false; array field names
// are positional and carry no order information).
func compareDocs(ad, bd []byte, names bool, depth int, sc StringComparer) (int, fault) {
	if depth > MaxDepth {
		return 0, faultA | faultB
	}
	ia, ib := newIter(ad), newIter(bd)
	for {
		ta, ka, va, okA := ia.next()
		tb, kb, vb, okB := ib.next()
		if f := sideFault(!ia.bad, !ib.bad); f != 0 {
			return 0, f
		}
		switch {
		case !okA && !okB:
			return 0, 0
		case !okA:
			return -1, 0
		case !okB:
			return 1, 0
		}
		if ta != tb {
			// valueLen accepted both types, so both ranks are valid.
			if c := cmp.Compare(canonicalRank[byte(ta)], canonicalRank[byte(tb)]); c != 0 {
				return c, 0
			}
		}
		if names {
			if c := bytes.Compare(ka, kb); c != 0 {
				return c, 0
			}
		}
		if c, f := compareValue(ta, va, tb, vb, depth, sc); c != 0 || f != 0 {
			return c, f
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
