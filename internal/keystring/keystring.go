package keystring

import (
	"bytes"
	"encoding/binary"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/recordid"
)

// CType bytes: the first byte of every encoded value. They follow MongoDB's key_string.cpp so
// that the canonical BSON type order falls out of the first byte. Every CType and every
// inverted CType (255-c) lies in [10, 245], so neither can be mistaken for kLess, kEnd or
// kGreater, which are never inverted.
const (
	ctMinKey     = 10
	ctUndefined  = 15 // below null, as MongoDB's kUndefined
	ctNullish    = 20 // null and EOO ("missing"; equal in bsonutil.Compare; TypeBits tell them apart)
	ctNumeric    = 30 // generic numeric CType, used only before field names inside objects
	ctNumNaN     = 30
	ctNumNegLarg = 31 // <= -2^63, including -Inf
	// 32..39: negative integer part in 8..1 bytes (ctNumNegSmall - n)
	ctNumNegSmall = 40 // (-1, 0)
	ctNumZero     = 41
	ctNumPosSmall = 42 // (0, 1)
	// 43..50: positive integer part in 1..8 bytes (ctNumPosSmall + n)
	ctNumPosLarge = 51 // >= 2^63, including +Inf
	ctStringLike  = 60 // string and symbol
	ctObject      = 70
	ctArray       = 80
	ctBinData     = 90
	ctOID         = 100
	ctBoolFalse   = 110
	ctBoolTrue    = 111
	ctDate        = 120
	ctTimestamp   = 130
	ctRegEx       = 140
	ctDBRef       = 150
	ctCode        = 160
	ctCodeWScope  = 170
	ctMaxKey      = 240
)

// Bytes that end a key. They are written with the ascending polarity whatever the Ordering, and
// kLess < kEnd < every CType (inverted or not) < kGreater.
const (
	kLess    = 1
	kEnd     = 4
	kGreater = 254
)

// maxDepth bounds nesting of objects and arrays on both encode and decode, so hostile input
// cannot exhaust the stack. It matches bsonutil.MaxDepth's spirit with a smaller bound: MongoDB
// itself refuses documents nested deeper than 100+ levels.
const maxDepth = 200

// Ordering is the direction of each key component: bit i set means component i is descending.
// Components past the 32nd are ascending (MongoDB limits compound indexes to 32 fields).
type Ordering uint32

// AllAscending is the Ordering of a key with every component ascending.
const AllAscending Ordering = 0

// MakeOrdering returns the Ordering of an index key pattern such as {a: 1, b: -1}: a field whose
// value is a negative number is descending; any other value (1, "hashed", "text") is ascending.
func MakeOrdering(keyPattern bsoncore.Document) Ordering {
	var o Ordering
	rem, ok := documentBody(keyPattern)
	if !ok {
		return 0
	}
	for i := 0; len(rem) > 0 && i < 32; i++ {
		el, next, ok := bsoncore.ReadElement(rem)
		if !ok {
			break
		}
		rem = next
		v := el.Value()
		if f, ok := v.AsFloat64OK(); ok && f < 0 {
			o |= 1 << uint(i)
		} else if v.Type == bsoncore.TypeDecimal128 && len(v.Data) >= 16 {
			// AsFloat64OK does not handle decimals: a negative non-zero, non-NaN one counts.
			kind, neg, chi, clo, _ := decimalParts(binary.LittleEndian.Uint64(v.Data[8:]), binary.LittleEndian.Uint64(v.Data))
			if neg && (kind == decKindInf || kind == decKindFinite && chi|clo != 0) {
				o |= 1 << uint(i)
			}
		}
	}
	return o
}

// descending reports whether component i is descending.
func (o Ordering) descending(i int) bool { return i < 32 && o&(1<<uint(i)) != 0 }

// Discriminator says where a key built from a prefix of the components sorts relative to the
// stored keys that share that prefix.
type Discriminator uint8

const (
	// Inclusive: the key sorts before every stored key with the same components (stored keys
	// carry a RecordId after kEnd, and a prefix sorts first).
	Inclusive Discriminator = iota
	// ExclusiveBefore: the key sorts before every key whose leading components equal it.
	ExclusiveBefore
	// ExclusiveAfter: the key sorts after every key whose leading components equal it, e.g. the
	// start of a scan for {a: {$gt: 5}}.
	ExclusiveAfter
)

// Builder builds one KeyString at a time. It is reusable: after warm-up, encoding values other
// than Decimal128 allocates nothing. The zero Builder is ready to use with AllAscending.
type Builder struct {
	ord   Ordering
	buf   []byte
	tb    []byte
	tbEnd int  // len(tb) through the last non-default TypeBits entry; tb[:tbEnd] is the result
	n     int  // number of components appended
	ended bool // kEnd (and any discriminator) has been written
	err   error
}

// NewBuilder returns a Builder reset to ord.
func NewBuilder(ord Ordering) *Builder {
	b := &Builder{}
	b.Reset(ord)
	return b
}

// Reset clears the builder for a new key with ordering ord, keeping its buffers.
func (b *Builder) Reset(ord Ordering) {
	b.ord = ord
	b.buf = b.buf[:0]
	b.tb = b.tb[:0]
	b.tbEnd = 0
	b.n = 0
	b.ended = false
	b.err = nil
}

// Err returns the first error met while building: a malformed value, or a value appended after
// the key was ended. A key built with an error must not be used.
func (b *Builder) Err() error { return b.err }

// AppendValue appends the next key component. A malformed value sets Err and appends nothing.
func (b *Builder) AppendValue(v bsoncore.Value) {
	if b.err != nil {
		return
	}
	if b.ended {
		b.err = mongoerr.New(mongoerr.InternalError, "keystring: value appended after the end of the key")
		return
	}
	start, tbStart, tbEnd := len(b.buf), len(b.tb), b.tbEnd
	if err := b.appendValue(v, 0); err != nil {
		b.buf, b.tb, b.tbEnd = b.buf[:start], b.tb[:tbStart], tbEnd
		b.err = err
		return
	}
	if b.ord.descending(b.n) {
		invert(b.buf[start:])
	}
	b.n++
}

// AppendDiscriminator ends the key with d. Without it the key ends Inclusive when a RecordId is
// appended or Bytes is called.
func (b *Builder) AppendDiscriminator(d Discriminator) {
	if b.ended {
		b.err = mongoerr.New(mongoerr.InternalError, "keystring: discriminator appended twice")
		return
	}
	switch d {
	case ExclusiveBefore:
		b.buf = append(b.buf, kLess)
	case ExclusiveAfter:
		b.buf = append(b.buf, kGreater)
	}
	b.buf = append(b.buf, kEnd)
	b.ended = true
}

// AppendRecordID ends the key (Inclusive if no discriminator was appended) and appends id in the
// suffix format DecodeRecordIDAtEnd reads.
func (b *Builder) AppendRecordID(id recordid.ID) {
	b.end()
	b.buf = appendRecordID(b.buf, id)
}

func (b *Builder) end() {
	if !b.ended {
		b.buf = append(b.buf, kEnd)
		b.ended = true
	}
}

// Bytes ends the key (Inclusive) if it is not ended and returns it. The slice is valid until the
// next Reset and must not be modified.
func (b *Builder) Bytes() []byte {
	b.end()
	return b.buf
}

// TypeBits returns what Decode needs besides the key to restore the exact original values; it
// is empty when every value has its default type (double, string, null). Valid until Reset.
func (b *Builder) TypeBits() []byte { return b.tb[:b.tbEnd] }

// Encode returns the KeyString of values under ord, with rid appended unless it is the null
// RecordId, and its TypeBits. Both are freshly allocated. Malformed values are skipped; use a
// Builder and check Err when the values are not known to be valid.
func Encode(values []bsoncore.Value, ord Ordering, rid recordid.ID) (ks, typeBits []byte) {
	var b Builder
	b.Reset(ord)
	for _, v := range values {
		b.AppendValue(v)
	}
	if !rid.IsNull() {
		b.AppendRecordID(rid)
	}
	ks = bytes.Clone(b.Bytes())
	if tb := b.TypeBits(); len(tb) > 0 {
		typeBits = bytes.Clone(tb)
	}
	return ks, typeBits
}

// Compare orders two KeyStrings; it is bytes.Compare, named for symmetry with bsonutil.Compare.
func Compare(a, b []byte) int { return bytes.Compare(a, b) }

// ToBSONKey returns the values as the document MongoDB shows for an index key (returnKey,
// explain): {"": v1, "": v2, ...}.
func ToBSONKey(values []bsoncore.Value) bsoncore.Document {
	return ToBSONKeyNamed(nil, values)
}

// ToBSONKeyNamed is ToBSONKey with field names (as in a DuplicateKey error's keyValue); values
// past the end of names get the empty name.
func ToBSONKeyNamed(names []string, values []bsoncore.Value) bsoncore.Document {
	idx, doc := bsoncore.AppendDocumentStart(nil)
	for i, v := range values {
		name := ""
		if i < len(names) {
			name = names[i]
		}
		doc = bsoncore.AppendValueElement(doc, name, v)
	}
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	return doc
}

// invert flips every byte of p: a descending component, or a negative number's magnitude.
func invert(p []byte) {
	for i := range p {
		p[i] = ^p[i]
	}
}

// TypeBits entries. One entry is written per numeric, string-like and nullish value, in the
// order Decode meets them; a missing entry (past the end of the TypeBits) is tag 0, which is
// why trailing default entries are dropped.
const (
	// numeric tags
	tbDouble     = 0 // followed by nothing: the key holds the exact double
	tbInt32      = 1
	tbInt64      = 2
	tbDecimal    = 3 // followed by the 16 raw bytes of the Decimal128 (any cohort member, NaN payload, non-canonical form)
	tbNegZero    = 4 // the double -0.0
	tbDoubleBits = 5 // followed by 8 raw bytes: a NaN other than the canonical quiet NaN
	// string-like tags
	tbString = 0
	tbSymbol = 1
	// nullish tags
	tbNull = 0
	// 1 was undefined, which now has its own CType.
	tbEOO = 2 // the zero bsoncore.Value ("missing"), which bsonutil ranks with null
)

// canonicalNaN is the quiet NaN MongoDB and Go produce; other NaNs keep their bits in TypeBits.
const canonicalNaN = 0x7FF8000000000000

func (b *Builder) appendTypeBits(tag byte, payload []byte) {
	b.tb = append(b.tb, tag)
	b.tb = append(b.tb, payload...)
	if tag != 0 {
		b.tbEnd = len(b.tb)
	}
}

// appendValue appends v's ascending encoding (the caller inverts a descending component).
func (b *Builder) appendValue(v bsoncore.Value, depth int) error {
	if depth > maxDepth {
		return mongoerr.New(mongoerr.BadValue, "keystring: value nested too deeply")
	}
	d := v.Data
	switch v.Type {
	case bsoncore.TypeMinKey:
		b.buf = append(b.buf, ctMinKey)
	case bsoncore.TypeMaxKey:
		b.buf = append(b.buf, ctMaxKey)
	case bsoncore.TypeNull:
		b.buf = append(b.buf, ctNullish)
		b.appendTypeBits(tbNull, nil)
	case bsoncore.TypeUndefined:
		b.buf = append(b.buf, ctUndefined)
	case 0:
		b.buf = append(b.buf, ctNullish)
		b.appendTypeBits(tbEOO, nil)
	case bsoncore.TypeDouble, bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDecimal128:
		return b.appendNumber(v.Type, d)
	case bsoncore.TypeString, bsoncore.TypeSymbol:
		s, _, ok := readString(d)
		if !ok {
			return malformed(v.Type)
		}
		b.buf = append(b.buf, ctStringLike)
		b.buf = appendEscaped(b.buf, s)
		if v.Type == bsoncore.TypeSymbol {
			b.appendTypeBits(tbSymbol, nil)
		} else {
			b.appendTypeBits(tbString, nil)
		}
	case bsoncore.TypeJavaScript:
		s, _, ok := readString(d)
		if !ok {
			return malformed(v.Type)
		}
		b.buf = append(b.buf, ctCode)
		b.buf = appendEscaped(b.buf, s)
	case bsoncore.TypeEmbeddedDocument:
		b.buf = append(b.buf, ctObject)
		return b.appendObjectBody(d, depth)
	case bsoncore.TypeArray:
		body, ok := documentBody(d)
		if !ok {
			return malformed(v.Type)
		}
		b.buf = append(b.buf, ctArray)
		for len(body) > 0 {
			el, rem, ok := bsoncore.ReadElement(body)
			if !ok {
				return malformed(v.Type)
			}
			body = rem
			if err := b.appendValue(el.Value(), depth+1); err != nil {
				return err
			}
		}
		b.buf = append(b.buf, 0)
	case bsoncore.TypeBinary:
		// BSON orders binData by length, then subtype, then bytes: so does this encoding. The
		// data is kept raw (for subtype 2 that includes its inner length), as compared.
		if len(d) < 5 {
			return malformed(v.Type)
		}
		n := int64(int32(binary.LittleEndian.Uint32(d)))
		if n < 0 || n+5 > int64(len(d)) {
			return malformed(v.Type)
		}
		b.buf = append(b.buf, ctBinData)
		if n < 0xFF {
			b.buf = append(b.buf, byte(n))
		} else {
			b.buf = append(b.buf, 0xFF)
			b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(n))
		}
		b.buf = append(b.buf, d[4:5+n]...)
	case bsoncore.TypeObjectID:
		if len(d) < 12 {
			return malformed(v.Type)
		}
		b.buf = append(b.buf, ctOID)
		b.buf = append(b.buf, d[:12]...)
	case bsoncore.TypeBoolean:
		// Any non-zero byte is true, as in bsonutil.Compare; it decodes as 1.
		if len(d) < 1 {
			return malformed(v.Type)
		}
		if d[0] != 0 {
			b.buf = append(b.buf, ctBoolTrue)
		} else {
			b.buf = append(b.buf, ctBoolFalse)
		}
	case bsoncore.TypeDateTime:
		if len(d) < 8 {
			return malformed(v.Type)
		}
		b.buf = append(b.buf, ctDate)
		b.buf = binary.BigEndian.AppendUint64(b.buf, binary.LittleEndian.Uint64(d)^(1<<63))
	case bsoncore.TypeTimestamp:
		// Little-endian (increment, seconds) is one uint64 ordered by (seconds, increment).
		if len(d) < 8 {
			return malformed(v.Type)
		}
		b.buf = append(b.buf, ctTimestamp)
		b.buf = binary.BigEndian.AppendUint64(b.buf, binary.LittleEndian.Uint64(d))
	case bsoncore.TypeRegex:
		// Pattern and flags are C strings (no NUL inside), so a 0 terminator keeps the order.
		p := bytes.IndexByte(d, 0)
		if p < 0 {
			return malformed(v.Type)
		}
		f := bytes.IndexByte(d[p+1:], 0)
		if f < 0 {
			return malformed(v.Type)
		}
		b.buf = append(b.buf, ctRegEx)
		b.buf = append(b.buf, d[:p+1+f+1]...)
	case bsoncore.TypeDBPointer:
		// bsonutil orders dbPointers by value size, then raw bytes: with equal sizes that is the
		// namespace bytes then the ObjectId. A big-endian length prefix encodes exactly that.
		s, rem, ok := readString(d)
		if !ok || len(rem) < 12 {
			return malformed(v.Type)
		}
		b.buf = append(b.buf, ctDBRef)
		b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(len(s)))
		b.buf = append(b.buf, s...)
		b.buf = append(b.buf, rem[:12]...)
	case bsoncore.TypeCodeWithScope:
		if len(d) < 4 {
			return malformed(v.Type)
		}
		n := int64(int32(binary.LittleEndian.Uint32(d)))
		if n < 4 || n > int64(len(d)) {
			return malformed(v.Type)
		}
		code, scope, ok := readString(d[4:n])
		if !ok {
			return malformed(v.Type)
		}
		b.buf = append(b.buf, ctCodeWScope)
		b.buf = appendEscaped(b.buf, code)
		return b.appendObjectBody(scope, depth)
	default:
		return mongoerr.Newf(mongoerr.BadValue, "keystring: cannot encode BSON type 0x%02x", byte(v.Type))
	}
	return nil
}

// appendObjectBody encodes the fields of document doc followed by a 0 terminator. Each field is
// the generic CType of its value (BSON orders fields by canonical type before the name), the
// name and a 0, then the value's full encoding.
func (b *Builder) appendObjectBody(doc []byte, depth int) error {
	body, ok := documentBody(doc)
	if !ok {
		return malformed(bsoncore.TypeEmbeddedDocument)
	}
	for len(body) > 0 {
		el, rem, ok := bsoncore.ReadElement(body)
		if !ok {
			return malformed(bsoncore.TypeEmbeddedDocument)
		}
		body = rem
		v := el.Value()
		ct, ok := genericCType(v.Type)
		if !ok {
			return malformed(v.Type)
		}
		b.buf = append(b.buf, ct)
		b.buf = append(b.buf, el.KeyBytes()...) // a C string: never contains 0
		b.buf = append(b.buf, 0)
		if err := b.appendValue(v, depth+1); err != nil {
			return err
		}
	}
	b.buf = append(b.buf, 0)
	return nil
}

// genericCType is the CType that stands for a BSON type's canonical rank before a field name.
func genericCType(t bsoncore.Type) (byte, bool) {
	switch t {
	case bsoncore.TypeMinKey:
		return ctMinKey, true
	case bsoncore.TypeMaxKey:
		return ctMaxKey, true
	case bsoncore.TypeUndefined:
		return ctUndefined, true
	case bsoncore.TypeNull:
		return ctNullish, true
	case bsoncore.TypeDouble, bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDecimal128:
		return ctNumeric, true
	case bsoncore.TypeString, bsoncore.TypeSymbol:
		return ctStringLike, true
	case bsoncore.TypeEmbeddedDocument:
		return ctObject, true
	case bsoncore.TypeArray:
		return ctArray, true
	case bsoncore.TypeBinary:
		return ctBinData, true
	case bsoncore.TypeObjectID:
		return ctOID, true
	case bsoncore.TypeBoolean:
		return ctBoolFalse, true
	case bsoncore.TypeDateTime:
		return ctDate, true
	case bsoncore.TypeTimestamp:
		return ctTimestamp, true
	case bsoncore.TypeRegex:
		return ctRegEx, true
	case bsoncore.TypeDBPointer:
		return ctDBRef, true
	case bsoncore.TypeJavaScript:
		return ctCode, true
	case bsoncore.TypeCodeWithScope:
		return ctCodeWScope, true
	}
	return 0, false
}

// appendEscaped appends s with every 0 byte written as 0x00 0xFF, then a 0x00 terminator, so a
// string sorts before any string it is a proper prefix of.
func appendEscaped(dst, s []byte) []byte {
	for {
		i := bytes.IndexByte(s, 0)
		if i < 0 {
			dst = append(dst, s...)
			return append(dst, 0)
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, 0, 0xFF)
		s = s[i+1:]
	}
}

// readString reads a BSON string (int32 length including the NUL, bytes, NUL) and returns its
// bytes without the NUL and what follows it.
func readString(d []byte) (s, rem []byte, ok bool) {
	if len(d) < 4 {
		return nil, nil, false
	}
	n := int64(int32(binary.LittleEndian.Uint32(d)))
	if n < 1 || 4+n > int64(len(d)) || d[3+n] != 0 {
		return nil, nil, false
	}
	return d[4 : 3+n], d[4+n:], true
}

// documentBody checks a document's framing and returns its elements without length and
// terminator.
func documentBody(d []byte) ([]byte, bool) {
	if len(d) < 5 {
		return nil, false
	}
	n := int64(int32(binary.LittleEndian.Uint32(d)))
	if n < 5 || n > int64(len(d)) || d[n-1] != 0 {
		return nil, false
	}
	return d[4 : n-1], true
}

func malformed(t bsoncore.Type) error {
	return mongoerr.Newf(mongoerr.BadValue, "keystring: malformed BSON %s value", t)
}
