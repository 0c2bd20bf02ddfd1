package resumetoken

import (
	"encoding/binary"
	"math"
	"math/bits"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// This file is the subset of MongoDB's KeyString V1 (key_string.cpp) that resume tokens need:
// encoding and decoding of a list of BSON values with the empty (all ascending) Ordering and
// the inclusive discriminator, plus the type bits that restore the original types. It is kept
// apart from internal/keystring, whose byte format is Humongo's own.
//
// Layout: each top-level value is its ctype byte followed by its payload; the key ends with
// ksEnd. Inside objects every field is (generic ctype, name NUL, value); objects and arrays
// end with a 0 byte. Negative numbers write their payload bit-flipped so that memcmp order is
// numeric order. Ints, longs, doubles and decimals of equal value encode identically; the type
// bits, a separate bit stream, say which one it was.

// ctype bytes (key_string.cpp's CType namespace).
const (
	ctMinKey        = 10
	ctUndefined     = 15
	ctNullish       = 20
	ctNumeric       = 30
	ctStringLike    = 60
	ctObject        = 70
	ctArray         = 80
	ctBinData       = 90
	ctOID           = 100
	ctBool          = 110
	ctDate          = 120
	ctTimestamp     = 130
	ctRegEx         = 140
	ctDBRef         = 150
	ctCode          = 160
	ctCodeWithScope = 170
	ctMaxKey        = 240

	ctNumericNaN                = ctNumeric + 0
	ctNumericNegLargeMagnitude  = ctNumeric + 1 // <= -2**63 including -Inf
	ctNumericNeg8ByteInt        = ctNumeric + 2
	ctNumericNeg1ByteInt        = ctNumeric + 9
	ctNumericNegSmallMagnitude  = ctNumeric + 10 // between 0 and -1 exclusive
	ctNumericZero               = ctNumeric + 11
	ctNumericPosSmallMagnitude  = ctNumeric + 12 // between 0 and 1 exclusive
	ctNumericPos1ByteInt        = ctNumeric + 13
	ctNumericPos8ByteInt        = ctNumeric + 20
	ctNumericPosLargeMagnitude  = ctNumeric + 21 // >= 2**63 including +Inf
	ctBoolFalse                 = ctBool + 0
	ctBoolTrue                  = ctBool + 1
	ksEnd                       = 0x04
	ksLess                      = 1
	ksGreater                   = 254
	maxDepth                    = 200 // BSONDepth::getMaxAllowableDepth's default
	tinyDoubleExponentShift     = 256
	storedDecimalExponentBits   = 6
	storedDecimalExponentMask   = 1<<storedDecimalExponentBits - 1
	maxBytesForShortTypeBits    = 127
	decimalMaxBiasedExponent    = 6143 + 6144
	decimalExponentBias         = 6176
	kMinLargeDouble             = float64(1 << 63) // first double that is not an int64
	kMaxIntForDouble            = float64(1 << 53)
	kTiniestDoubleWith2BitDCM   = 0x1p-255
	kTinyDoubleExponentUpshift  = 0x1p256
	kTinyDoubleExponentDownshft = 0x1p-256
)

// Decimal continuation markers: how a decimal relates to the double stored in its place.
const (
	dcmEqualToDouble                          = 0
	dcmHasContinuationLessThanDoubleRounded15 = 1
	dcmEqualToDoubleRoundedUpTo15Digits       = 2
	dcmHasContinuationLargerThanDouble        = 3
)

// Type bit values (key_string.h's TypeBits).
const (
	tbString             = 0
	tbSymbol             = 1
	tbInt                = 0
	tbLong               = 1
	tbDouble             = 2
	tbDecimal            = 3
	tbSpecialZeroPrefix  = 3
	tbNegativeDoubleZero = 3
	tbV1NegDoubleZero    = 0x18
	tbDecimalZero0xxx    = 0x1a
)

func bsonTypeToGenericCType(t bsoncore.Type) byte {
	switch t {
	case bsoncore.TypeMinKey:
		return ctMinKey
	case bsoncore.TypeNull:
		return ctNullish
	case bsoncore.TypeUndefined:
		return ctUndefined
	case bsoncore.TypeDouble, bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDecimal128:
		return ctNumeric
	case bsoncore.TypeString, bsoncore.TypeSymbol:
		return ctStringLike
	case bsoncore.TypeEmbeddedDocument:
		return ctObject
	case bsoncore.TypeArray:
		return ctArray
	case bsoncore.TypeBinary:
		return ctBinData
	case bsoncore.TypeObjectID:
		return ctOID
	case bsoncore.TypeBoolean:
		return ctBool
	case bsoncore.TypeDateTime:
		return ctDate
	case bsoncore.TypeTimestamp:
		return ctTimestamp
	case bsoncore.TypeRegex:
		return ctRegEx
	case bsoncore.TypeDBPointer:
		return ctDBRef
	case bsoncore.TypeJavaScript:
		return ctCode
	case bsoncore.TypeCodeWithScope:
		return ctCodeWithScope
	case bsoncore.TypeMaxKey:
		return ctMaxKey
	}
	return 0
}

// ---------------------------------------------------------------------------------------------
// Type bits

// typeBits is the bit stream that disambiguates values KeyString encodes alike.
type typeBits struct {
	data     []byte
	nbits    int
	allZeros bool
}

func (t *typeBits) appendBit(b byte) {
	if b == 1 {
		t.allZeros = false
	}
	if t.nbits%8 == 0 {
		t.data = append(t.data, 0)
	}
	t.data[len(t.data)-1] |= b << (t.nbits % 8)
	t.nbits++
}

func (t *typeBits) appendBits(v uint32, n int) {
	for i := n - 1; i >= 0; i-- {
		t.appendBit(byte(v>>i) & 1)
	}
}

func (t *typeBits) appendNumeric(kind byte) { t.appendBits(uint32(kind), 2) }

func (t *typeBits) appendDecimalZero(whichZero uint32) {
	t.appendBits(whichZero>>12+tbDecimalZero0xxx, 5)
	t.appendBits(whichZero, 12)
}

// serialize returns the type bits as MongoDB's TypeBits::getBuffer/getSize lay them out, or
// nil when every bit is zero (the token then has no _typeBits).
func (t *typeBits) serialize() []byte {
	if t.allZeros || len(t.data) == 0 {
		return nil
	}
	n := len(t.data)
	switch {
	case n == 1 && t.data[0]&0x80 == 0:
		return []byte{t.data[0]}
	case n <= maxBytesForShortTypeBits:
		return append([]byte{0x80 | byte(n)}, t.data...)
	default:
		out := []byte{0x80, 0, 0, 0, 0}
		binary.LittleEndian.PutUint32(out[1:], uint32(n))
		return append(out, t.data...)
	}
}

// typeBitsReader reads type bits back, as TypeBits::Reader.
type typeBitsReader struct {
	data     []byte
	cur      int
	allZeros bool
}

// parseTypeBits reads a serialized TypeBits (TypeBits::resetFromBuffer); an empty buffer is
// the all-zeros state.
func parseTypeBits(buf []byte) (*typeBitsReader, error) {
	if len(buf) == 0 {
		return &typeBitsReader{allZeros: true}, nil
	}
	first := buf[0]
	var size int
	rest := buf
	switch {
	case first > 0 && first < 0x80:
		size = 1
	case first > 0x80:
		size, rest = int(first&0x7f), buf[1:]
	case first == 0x80:
		if len(buf) < 5 {
			return nil, errShortBuffer()
		}
		s := binary.LittleEndian.Uint32(buf[1:5])
		if s <= maxBytesForShortTypeBits {
			return nil, ksErr(mongoerr.Location50910, "Invalid overlong encoding.")
		}
		if uint64(s) > uint64(len(buf)-5) {
			return nil, errShortBuffer()
		}
		size, rest = int(s), buf[5:]
	default: // 0: all zeros
		rest = buf[1:]
	}
	if size > len(rest) {
		return nil, errShortBuffer()
	}
	return &typeBitsReader{data: rest[:size], allZeros: size == 0}, nil
}

func (r *typeBitsReader) readBit() (byte, error) {
	if r.allZeros {
		return 0, nil
	}
	byteIdx, off := r.cur/8, r.cur%8
	r.cur++
	if byteIdx >= len(r.data) {
		return 0, ksErr(mongoerr.Location50615, "Invalid size byte(s).")
	}
	return (r.data[byteIdx] >> off) & 1, nil
}

func (r *typeBitsReader) readBits(n int) (uint32, error) {
	var v uint32
	for range n {
		b, err := r.readBit()
		if err != nil {
			return 0, err
		}
		v = v<<1 | uint32(b)
	}
	return v, nil
}

func (r *typeBitsReader) readNumeric() (byte, error) {
	v, err := r.readBits(2)
	return byte(v), err
}

// readZero returns tbInt, tbLong, tbDouble, tbNegativeDoubleZero or a 5-bit decimal zero
// prefix (tbDecimalZero0xxx..).
func (r *typeBitsReader) readZero() (byte, error) {
	res, err := r.readNumeric()
	if err != nil {
		return 0, err
	}
	if res == tbSpecialZeroPrefix {
		more, err := r.readBits(3)
		if err != nil {
			return 0, err
		}
		res = res<<3 | byte(more)
	}
	if res == tbV1NegDoubleZero {
		res = tbNegativeDoubleZero
	}
	return res, nil
}

// ---------------------------------------------------------------------------------------------
// Encoding

type ksBuilder struct {
	buf []byte
	tb  typeBits
}

func newKSBuilder() *ksBuilder { return &ksBuilder{tb: typeBits{allZeros: true}} }

func (b *ksBuilder) appendByte(c byte, invert bool) {
	if invert {
		c = ^c
	}
	b.buf = append(b.buf, c)
}

func (b *ksBuilder) appendBytes(p []byte, invert bool) {
	for _, c := range p {
		b.appendByte(c, invert)
	}
}

func (b *ksBuilder) appendU64(v uint64, invert bool) {
	var p [8]byte
	binary.BigEndian.PutUint64(p[:], v)
	b.appendBytes(p[:], invert)
}

// errMalformed is returned for a value whose BSON bytes are corrupt.
func errMalformed(t bsoncore.Type) error {
	return mongoerr.Newf(mongoerr.InvalidBSON, "resume token: malformed BSON %s value", t)
}

// appendValue appends one value without a field name (a top-level key part or an array
// element), as BuilderBase::_appendBsonValue.
func (b *ksBuilder) appendValue(v bsoncore.Value, depth int) error {
	if depth > maxDepth {
		return mongoerr.New(mongoerr.Overflow, "resume token: BSON nesting too deep")
	}
	d := v.Data
	switch v.Type {
	case bsoncore.TypeMinKey, bsoncore.TypeMaxKey, bsoncore.TypeNull, bsoncore.TypeUndefined:
		b.appendByte(bsonTypeToGenericCType(v.Type), false)
	case bsoncore.TypeDouble:
		f, ok := v.DoubleOK()
		if !ok {
			return errMalformed(v.Type)
		}
		if f == 0 && math.Signbit(f) {
			b.tb.appendBits(tbV1NegDoubleZero, 5)
		} else {
			b.tb.appendNumeric(tbDouble)
		}
		b.appendDoubleWithoutTypeBits(f, dcmEqualToDouble)
	case bsoncore.TypeString, bsoncore.TypeSymbol:
		var s string
		var ok bool
		if v.Type == bsoncore.TypeString {
			s, ok = v.StringValueOK()
			b.tb.appendBit(tbString)
		} else {
			s, ok = v.SymbolOK()
			b.tb.appendBit(tbSymbol)
		}
		if !ok {
			return errMalformed(v.Type)
		}
		b.appendByte(ctStringLike, false)
		b.appendStringLike(s)
	case bsoncore.TypeEmbeddedDocument:
		doc, ok := v.DocumentOK()
		if !ok {
			return errMalformed(v.Type)
		}
		b.appendByte(ctObject, false)
		return b.appendBSON(doc, depth+1)
	case bsoncore.TypeArray:
		arr, ok := v.ArrayOK()
		if !ok {
			return errMalformed(v.Type)
		}
		vals, err := bsoncore.Document(arr).Values()
		if err != nil {
			return errMalformed(v.Type)
		}
		b.appendByte(ctArray, false)
		for _, e := range vals {
			if err := b.appendValue(e, depth+1); err != nil {
				return err
			}
		}
		b.appendByte(0, false)
	case bsoncore.TypeBinary:
		// The raw bytes, including the inner length of the old binary subtype 2, as
		// BSONElement::binData returns them.
		if len(d) < 5 {
			return errMalformed(v.Type)
		}
		n := int32(binary.LittleEndian.Uint32(d))
		if n < 0 || int(n) > len(d)-5 {
			return errMalformed(v.Type)
		}
		b.appendByte(ctBinData, false)
		if n < 0xff {
			b.appendByte(byte(n), false)
		} else {
			b.appendByte(0xff, false)
			var p [4]byte
			binary.BigEndian.PutUint32(p[:], uint32(n))
			b.appendBytes(p[:], false)
		}
		b.appendByte(d[4], false)
		b.appendBytes(d[5:5+n], false)
	case bsoncore.TypeObjectID:
		if len(d) < 12 {
			return errMalformed(v.Type)
		}
		b.appendByte(ctOID, false)
		b.appendBytes(d[:12], false)
	case bsoncore.TypeBoolean:
		t, ok := v.BooleanOK()
		if !ok {
			return errMalformed(v.Type)
		}
		if t {
			b.appendByte(ctBoolTrue, false)
		} else {
			b.appendByte(ctBoolFalse, false)
		}
	case bsoncore.TypeDateTime:
		ms, ok := v.DateTimeOK()
		if !ok {
			return errMalformed(v.Type)
		}
		b.appendByte(ctDate, false)
		b.appendU64(uint64(ms)^(1<<63), false)
	case bsoncore.TypeTimestamp:
		t, i, ok := v.TimestampOK()
		if !ok {
			return errMalformed(v.Type)
		}
		b.appendByte(ctTimestamp, false)
		b.appendU64(uint64(t)<<32|uint64(i), false)
	case bsoncore.TypeRegex:
		pat, opts, ok := v.RegexOK()
		if !ok {
			return errMalformed(v.Type)
		}
		b.appendByte(ctRegEx, false)
		b.appendBytes([]byte(pat), false)
		b.appendByte(0, false)
		b.appendBytes([]byte(opts), false)
		b.appendByte(0, false)
	case bsoncore.TypeDBPointer:
		ns, oid, ok := v.DBPointerOK()
		if !ok {
			return errMalformed(v.Type)
		}
		b.appendByte(ctDBRef, false)
		var p [4]byte
		binary.BigEndian.PutUint32(p[:], uint32(len(ns)))
		b.appendBytes(p[:], false)
		b.appendBytes([]byte(ns), false)
		b.appendBytes(oid[:], false)
	case bsoncore.TypeJavaScript:
		s, ok := v.JavaScriptOK()
		if !ok {
			return errMalformed(v.Type)
		}
		b.appendByte(ctCode, false)
		b.appendStringLike(s)
	case bsoncore.TypeCodeWithScope:
		code, scope, ok := v.CodeWithScopeOK()
		if !ok {
			return errMalformed(v.Type)
		}
		b.appendByte(ctCodeWithScope, false)
		b.appendStringLike(code)
		return b.appendBSON(scope, depth+2)
	case bsoncore.TypeInt32:
		i, ok := v.Int32OK()
		if !ok {
			return errMalformed(v.Type)
		}
		b.tb.appendNumeric(tbInt)
		b.appendInteger(int64(i))
	case bsoncore.TypeInt64:
		i, ok := v.Int64OK()
		if !ok {
			return errMalformed(v.Type)
		}
		b.tb.appendNumeric(tbLong)
		b.appendInteger(i)
	case bsoncore.TypeDecimal128:
		if len(d) < 16 {
			return errMalformed(v.Type)
		}
		b.appendDecimal(decimalFromBSON(d))
	default:
		return mongoerr.Newf(mongoerr.BadValue, "resume token: cannot encode BSON type %d", byte(v.Type))
	}
	return nil
}

// appendBSON appends an object's fields as (generic ctype, name NUL, value) and a 0 byte.
func (b *ksBuilder) appendBSON(doc bsoncore.Document, depth int) error {
	elems, err := doc.Elements()
	if err != nil {
		return errMalformed(bsoncore.TypeEmbeddedDocument)
	}
	for _, e := range elems {
		v := e.Value()
		b.appendByte(bsonTypeToGenericCType(v.Type), false)
		b.appendBytes([]byte(e.Key()), false)
		b.appendByte(0, false)
		if err := b.appendValue(v, depth); err != nil {
			return err
		}
	}
	b.appendByte(0, false)
	return nil
}

// appendStringLike writes s with each NUL byte as 00 FF, then a terminating 0.
func (b *ksBuilder) appendStringLike(s string) {
	for i := 0; i < len(s); i++ {
		b.appendByte(s[i], false)
		if s[i] == 0 {
			b.appendByte(0xff, false)
		}
	}
	b.appendByte(0, false)
}

// appendInteger encodes an int32 or int64 (their type bits are the caller's).
func (b *ksBuilder) appendInteger(n int64) {
	switch {
	case n == math.MinInt64:
		// -2**63 is a double exactly, and not a positive int64.
		b.appendLargeDouble(float64(n), dcmEqualToDouble)
	case n == 0:
		b.appendByte(ctNumericZero, false)
	case n < 0:
		b.appendPreshiftedIntegerPortion(uint64(-n)<<1, true)
	default:
		b.appendPreshiftedIntegerPortion(uint64(n)<<1, false)
	}
}

// appendPreshiftedIntegerPortion writes value (the magnitude shifted left once, its low bit
// saying whether a fraction follows) in as few big-endian bytes as it needs.
func (b *ksBuilder) appendPreshiftedIntegerPortion(value uint64, negative bool) {
	n := (64 - bits.LeadingZeros64(value) + 7) / 8
	var p [8]byte
	binary.BigEndian.PutUint64(p[:], value)
	if negative {
		b.appendByte(byte(ctNumericNeg1ByteInt-(n-1)), false)
	} else {
		b.appendByte(byte(ctNumericPos1ByteInt+(n-1)), false)
	}
	b.appendBytes(p[8-n:], negative)
}

// appendDoubleWithoutTypeBits encodes a double (or the double standing for a decimal, dcm
// saying how the decimal relates to it).
func (b *ksBuilder) appendDoubleWithoutTypeBits(num float64, dcm int) {
	negative := num < 0
	magnitude := math.Abs(num)
	if !(magnitude >= 1) {
		switch {
		case magnitude > 0:
			b.appendSmallDouble(num, dcm)
		case num == 0:
			b.appendByte(ctNumericZero, false)
		default:
			b.appendByte(ctNumericNaN, false)
		}
		return
	}
	if magnitude >= kMinLargeDouble {
		b.appendLargeDouble(num, dcm)
		return
	}
	integerPart := uint64(magnitude)
	if float64(integerPart) == magnitude && dcm == dcmEqualToDouble {
		b.appendPreshiftedIntegerPortion(integerPart<<1, negative)
		return
	}
	// KeyString V1: the integer part's bytes, then the fraction, 8 bytes in all, the low two
	// bits holding the DCM.
	fractionalBytes := bits.LeadingZeros64(integerPart<<1) / 8
	if negative {
		b.appendByte(byte(ctNumericNeg8ByteInt+fractionalBytes), false)
	} else {
		b.appendByte(byte(ctNumericPos8ByteInt-fractionalBytes), false)
	}
	encoding := uint64(magnitude * math.Ldexp(1, 8*fractionalBytes))
	encoding += (integerPart + 1) << (fractionalBytes * 8)
	encoding |= uint64(dcm)
	b.appendU64(encoding, negative)
}

func (b *ksBuilder) appendSmallDouble(value float64, dcm int) {
	negative := value < 0
	magnitude := math.Abs(value)
	if negative {
		b.appendByte(ctNumericNegSmallMagnitude, false)
	} else {
		b.appendByte(ctNumericPosSmallMagnitude, false)
	}
	var encoded uint64
	if magnitude >= kTiniestDoubleWith2BitDCM {
		// [2**-255, 1): prefix 0b11.
		encoded = math.Float64bits(magnitude)<<2 | uint64(dcm)
	} else {
		// [denorm_min, 2**-255): prefixes 0b01 or 0b10 (0b00 is for decimals even smaller).
		encoded = math.Float64bits(magnitude*kTinyDoubleExponentUpshift) << 1
		if dcm != dcmEqualToDouble {
			encoded |= 1
		}
		encoded += 1 << 62
	}
	b.appendU64(encoded, negative)
}

func (b *ksBuilder) appendLargeDouble(value float64, dcm int) {
	if value > 0 {
		b.appendByte(ctNumericPosLargeMagnitude, false)
	} else {
		b.appendByte(ctNumericNegLargeMagnitude, false)
	}
	encoded := math.Float64bits(value)
	if math.IsInf(value, 0) {
		encoded = ^uint64(0)
	} else {
		encoded <<= 1
		encoded &^= 1 << 63
		if dcm != dcmEqualToDouble {
			encoded |= 1
		}
	}
	b.appendU64(encoded, !(value > 0))
}

// ---------------------------------------------------------------------------------------------
// Decoding

func ksErr(code mongoerr.Code, msg string) error {
	return mongoerr.New(code, "KeyString format error: "+msg)
}

func errShortBuffer() error {
	return mongoerr.New(mongoerr.Overflow, "KeyString format error: not enough bytes left in the buffer")
}

type ksReader struct {
	b   []byte
	pos int
}

func (r *ksReader) remaining() int { return len(r.b) - r.pos }

func (r *ksReader) skip(n int) ([]byte, error) {
	if n < 0 || n > r.remaining() {
		return nil, errShortBuffer()
	}
	p := r.b[r.pos : r.pos+n]
	r.pos += n
	return p, nil
}

func (r *ksReader) readByte(inverted bool) (byte, error) {
	p, err := r.skip(1)
	if err != nil {
		return 0, err
	}
	if inverted {
		return ^p[0], nil
	}
	return p[0], nil
}

func (r *ksReader) readU64(inverted bool) (uint64, error) {
	p, err := r.skip(8)
	if err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint64(p)
	if inverted {
		v = ^v
	}
	return v, nil
}

func (r *ksReader) readU32() (uint32, error) {
	p, err := r.skip(4)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(p), nil
}

// readCString reads up to a 0 byte (error 50816 without one).
func (r *ksReader) readCString() ([]byte, error) {
	for i := r.pos; i < len(r.b); i++ {
		if r.b[i] == 0 {
			s := r.b[r.pos:i]
			r.pos = i + 1
			return s, nil
		}
	}
	return nil, ksErr(mongoerr.Location50816, "Failed to find null terminator in string.")
}

// readCStringWithNuls reads a string written by appendStringLike.
func (r *ksReader) readCStringWithNuls() ([]byte, error) {
	first, err := r.readCString()
	if err != nil {
		return nil, err
	}
	if r.remaining() == 0 || r.b[r.pos] != 0xff {
		return first, nil
	}
	out := append([]byte(nil), first...)
	for r.remaining() > 0 && r.b[r.pos] == 0xff {
		out = append(out, 0)
		r.pos++
		next, err := r.readCString()
		if err != nil {
			return nil, err
		}
		out = append(out, next...)
	}
	return out, nil
}

// decodeKey decodes a KeyString (all ascending) into its top-level values, as toBsonSafe.
func decodeKey(key []byte, tb *typeBitsReader) ([]bsoncore.Value, error) {
	r := &ksReader{b: key}
	var out []bsoncore.Value
	for r.remaining() > 0 {
		ctype, _ := r.readByte(false)
		if ctype == ksLess || ctype == ksGreater {
			// A discriminator: logically part of the previous field.
			var err error
			if ctype, err = r.readByte(false); err != nil {
				return nil, err
			}
		}
		if ctype == ksEnd {
			break
		}
		v, err := readValue(ctype, r, tb, false, 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func readBSON(r *ksReader, tb *typeBitsReader, depth int) ([]byte, error) {
	idx, dst := bsoncore.AppendDocumentStart(nil)
	for {
		c, err := r.readByte(false)
		if err != nil {
			return nil, err
		}
		if c == 0 {
			break
		}
		name, err := r.readCString()
		if err != nil {
			return nil, err
		}
		ctype, err := r.readByte(false)
		if err != nil {
			return nil, err
		}
		v, err := readValue(ctype, r, tb, false, depth)
		if err != nil {
			return nil, err
		}
		dst = bsoncore.AppendHeader(dst, v.Type, string(name))
		dst = append(dst, v.Data...)
	}
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst, nil
}

// readValue decodes one value of the given ctype, as key_string.cpp's toBsonValue.
func readValue(ctype byte, r *ksReader, tb *typeBitsReader, inverted bool, depth int) (bsoncore.Value, error) {
	if depth > maxDepth {
		return bsoncore.Value{}, mongoerr.New(mongoerr.Overflow,
			"KeyString format error: KeyString encoding exceeded maximum allowable BSON nesting depth")
	}
	val := func(t bsoncore.Type, d []byte) (bsoncore.Value, error) { return bsoncore.Value{Type: t, Data: d}, nil }
	switch ctype {
	case ctMinKey:
		return val(bsoncore.TypeMinKey, nil)
	case ctMaxKey:
		return val(bsoncore.TypeMaxKey, nil)
	case ctNullish:
		return val(bsoncore.TypeNull, nil)
	case ctUndefined:
		return val(bsoncore.TypeUndefined, nil)
	case ctBoolTrue:
		return val(bsoncore.TypeBoolean, []byte{1})
	case ctBoolFalse:
		return val(bsoncore.TypeBoolean, []byte{0})
	case ctDate:
		u, err := r.readU64(inverted)
		if err != nil {
			return bsoncore.Value{}, err
		}
		return val(bsoncore.TypeDateTime, bsoncore.AppendDateTime(nil, int64(u^(1<<63))))
	case ctTimestamp:
		u, err := r.readU64(inverted)
		if err != nil {
			return bsoncore.Value{}, err
		}
		return val(bsoncore.TypeTimestamp, bsoncore.AppendTimestamp(nil, uint32(u>>32), uint32(u)))
	case ctOID:
		p, err := r.skip(12)
		if err != nil {
			return bsoncore.Value{}, err
		}
		return val(bsoncore.TypeObjectID, append([]byte(nil), p...))
	case ctStringLike:
		orig, err := tb.readBit()
		if err != nil {
			return bsoncore.Value{}, err
		}
		s, err := r.readCStringWithNuls()
		if err != nil {
			return bsoncore.Value{}, err
		}
		if orig == tbString {
			return val(bsoncore.TypeString, bsoncore.AppendString(nil, string(s)))
		}
		return val(bsoncore.TypeSymbol, bsoncore.AppendSymbol(nil, string(s)))
	case ctCode:
		s, err := r.readCStringWithNuls()
		if err != nil {
			return bsoncore.Value{}, err
		}
		return val(bsoncore.TypeJavaScript, bsoncore.AppendJavaScript(nil, string(s)))
	case ctCodeWithScope:
		code, err := r.readCStringWithNuls()
		if err != nil {
			return bsoncore.Value{}, err
		}
		// BSON validation counts a code-with-scope as two nesting levels.
		scope, err := readBSON(r, tb, depth+2)
		if err != nil {
			return bsoncore.Value{}, err
		}
		return val(bsoncore.TypeCodeWithScope, bsoncore.AppendCodeWithScope(nil, string(code), scope))
	case ctBinData:
		c, err := r.readByte(inverted)
		if err != nil {
			return bsoncore.Value{}, err
		}
		size := uint32(c)
		if c == 0xff {
			if size, err = r.readU32(); err != nil {
				return bsoncore.Value{}, err
			}
		}
		sub, err := r.readByte(inverted)
		if err != nil {
			return bsoncore.Value{}, err
		}
		if size > uint32(r.remaining()) {
			return bsoncore.Value{}, errShortBuffer()
		}
		p, _ := r.skip(int(size))
		if sub == 7 { // Column: structured data MongoDB validates; Humongo does not decode it.
			return bsoncore.Value{}, ksErr(mongoerr.Location50833, "Expected valid BSONColumn data")
		}
		d := binary.LittleEndian.AppendUint32(nil, size)
		d = append(d, sub)
		return val(bsoncore.TypeBinary, append(d, p...))
	case ctRegEx:
		pat, err := r.readCString()
		if err != nil {
			return bsoncore.Value{}, err
		}
		flags, err := r.readCString()
		if err != nil {
			return bsoncore.Value{}, err
		}
		return val(bsoncore.TypeRegex, bsoncore.AppendRegex(nil, string(pat), string(flags)))
	case ctDBRef:
		size, err := r.readU32()
		if err != nil {
			return bsoncore.Value{}, err
		}
		if size > uint32(r.remaining()) {
			return bsoncore.Value{}, errShortBuffer()
		}
		ns, _ := r.skip(int(size))
		oid, err := r.skip(12)
		if err != nil {
			return bsoncore.Value{}, err
		}
		var o [12]byte
		copy(o[:], oid)
		return val(bsoncore.TypeDBPointer, bsoncore.AppendDBPointer(nil, string(ns), o))
	case ctObject:
		doc, err := readBSON(r, tb, depth+1)
		if err != nil {
			return bsoncore.Value{}, err
		}
		return val(bsoncore.TypeEmbeddedDocument, doc)
	case ctArray:
		idx, dst := bsoncore.AppendArrayStart(nil)
		for i := 0; ; i++ {
			et, err := r.readByte(inverted)
			if err != nil {
				return bsoncore.Value{}, err
			}
			if et == 0 {
				break
			}
			v, err := readValue(et, r, tb, inverted, depth+1)
			if err != nil {
				return bsoncore.Value{}, err
			}
			dst = bsoncore.AppendHeader(dst, v.Type, itoa(i))
			dst = append(dst, v.Data...)
		}
		dst, _ = bsoncore.AppendArrayEnd(dst, idx)
		return val(bsoncore.TypeArray, dst)
	case ctNumericNaN:
		kind, err := tb.readNumeric()
		if err != nil {
			return bsoncore.Value{}, err
		}
		if kind == tbDouble {
			return val(bsoncore.TypeDouble, bsoncore.AppendDouble(nil, math.NaN()))
		}
		if kind != tbDecimal {
			return bsoncore.Value{}, ksErr(mongoerr.Location50819, "Invalid type bits for numeric NaN")
		}
		return decimalValue(decimalPositiveNaN), nil
	case ctNumericZero:
		return readZero(tb)
	case ctNumericNegLargeMagnitude, ctNumericPosLargeMagnitude:
		return readLargeMagnitude(ctype, r, tb, inverted)
	case ctNumericNegSmallMagnitude, ctNumericPosSmallMagnitude:
		return readSmallMagnitude(ctype, r, tb, inverted)
	}
	if ctype >= ctNumericNeg8ByteInt && ctype <= ctNumericNeg1ByteInt ||
		ctype >= ctNumericPos1ByteInt && ctype <= ctNumericPos8ByteInt {
		return readInt(ctype, r, tb, inverted)
	}
	return bsoncore.Value{}, ksErr(mongoerr.Location50811, "Unknown type: "+itoa(int(ctype)))
}

func itoa(i int) string {
	if i >= 0 && i < 10 {
		return string(rune('0' + i))
	}
	var p [20]byte
	n := len(p)
	neg := i < 0
	u := uint64(i)
	if neg {
		u = uint64(-i)
	}
	for u > 0 {
		n--
		p[n] = byte('0' + u%10)
		u /= 10
	}
	if neg {
		n--
		p[n] = '-'
	}
	return string(p[n:])
}

func readZero(tb *typeBitsReader) (bsoncore.Value, error) {
	zt, err := tb.readZero()
	if err != nil {
		return bsoncore.Value{}, err
	}
	switch zt {
	case tbDouble:
		return bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, 0)}, nil
	case tbInt:
		return bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 0)}, nil
	case tbLong:
		return bsoncore.Value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, 0)}, nil
	case tbNegativeDoubleZero:
		return bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, math.Copysign(0, -1))}, nil
	}
	// A decimal zero: 3 bits of prefix, 12 more bits, which of the 2*(kMaxBiasedExponent+1).
	rest, err := tb.readBits(12)
	if err != nil {
		return bsoncore.Value{}, err
	}
	whichZero := (uint32(zt)-tbDecimalZero0xxx)<<12 | rest
	negative := whichZero > decimalMaxBiasedExponent
	exp := whichZero
	if negative {
		exp -= decimalMaxBiasedExponent + 1
	}
	if exp > decimalMaxBiasedExponent {
		return bsoncore.Value{}, ksErr(mongoerr.Location50846, "Invalid numeric zero decimal.")
	}
	return decimalValue(makeDecimal(negative, exp, 0, 0)), nil
}

func readLargeMagnitude(ctype byte, r *ksReader, tb *typeBitsReader, inverted bool) (bsoncore.Value, error) {
	negative := ctype == ctNumericNegLargeMagnitude
	if negative {
		inverted = !inverted
	}
	orig, err := tb.readNumeric()
	if err != nil {
		return bsoncore.Value{}, err
	}
	encoded, err := r.readU64(inverted)
	if err != nil {
		return bsoncore.Value{}, err
	}
	var bin float64
	hasContinuation := false
	switch {
	case encoded&(1<<63) == 0: // a finite double
		hasContinuation = encoded&1 == 1
		bin = math.Float64frombits(encoded>>1 | 1<<62)
		if negative {
			bin = -bin
		}
	case encoded == ^uint64(0):
		bin = math.Inf(1)
		if negative {
			bin = math.Inf(-1)
		}
	default: // a decimal too large for a double, stored directly
		if orig != tbDecimal {
			return bsoncore.Value{}, ksErr(mongoerr.Location50818, "Invalid type bits for decimal number.")
		}
		lo, err := r.readU64(inverted)
		if err != nil {
			return bsoncore.Value{}, err
		}
		dec := decimal128{hi: encoded &^ (1 << 63), lo: lo}
		if negative {
			dec = dec.negate()
		}
		if dec.isFinite() {
			if dec, err = adjustDecimalExponent(tb, dec); err != nil {
				return bsoncore.Value{}, err
			}
		}
		return decimalValue(dec), nil
	}
	switch orig {
	case tbDouble:
		return bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, bin)}, nil
	case tbLong:
		if bin != float64(math.MinInt64) {
			return bsoncore.Value{}, ksErr(mongoerr.Location50821, "Unexpected value for large number.")
		}
		return bsoncore.Value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, math.MinInt64)}, nil
	case tbDecimal:
	default:
		return bsoncore.Value{}, ksErr(mongoerr.Location50826, "Unexpected type of large number.")
	}
	dec := decimalFromDouble(bin, 34, awayFromZero(negative))
	if hasContinuation {
		if dec, err = readDecimalContinuation(r, inverted, dec); err != nil {
			return bsoncore.Value{}, err
		}
	}
	if dec.isFinite() {
		if dec, err = adjustDecimalExponent(tb, dec); err != nil {
			return bsoncore.Value{}, err
		}
	}
	return decimalValue(dec), nil
}

func readSmallMagnitude(ctype byte, r *ksReader, tb *typeBitsReader, inverted bool) (bsoncore.Value, error) {
	negative := ctype == ctNumericNegSmallMagnitude
	if negative {
		inverted = !inverted
	}
	orig, err := tb.readNumeric()
	if err != nil {
		return bsoncore.Value{}, err
	}
	encoded, err := r.readU64(inverted)
	if err != nil {
		return bsoncore.Value{}, err
	}
	sign := func(f float64) float64 {
		if negative {
			return -f
		}
		return f
	}
	var dec decimal128
	switch encoded >> 62 {
	case 0: // a decimal smaller in magnitude than 2**-1074, stored directly
		lo, err := r.readU64(inverted)
		if err != nil {
			return bsoncore.Value{}, err
		}
		dec = decimal128{hi: encoded, lo: lo}
		if dec, err = adjustDecimalExponent(tb, dec); err != nil {
			return bsoncore.Value{}, err
		}
		if negative {
			dec = dec.negate()
		}
		return decimalValue(dec), nil
	case 1, 2: // magnitude in [2**-1074, 2**-255), exponent shifted up by 256
		hasContinuation := encoded&1 == 1
		scaledBin := math.Float64frombits((encoded - 1<<62) >> 1)
		if orig == tbDouble {
			if hasContinuation {
				return bsoncore.Value{}, ksErr(mongoerr.Location50822, "Unexpected decimal continuation.")
			}
			return bsoncore.Value{Type: bsoncore.TypeDouble,
				Data: bsoncore.AppendDouble(nil, sign(scaledBin*kTinyDoubleExponentDownshft))}, nil
		}
		if orig != tbDecimal || !hasContinuation {
			return bsoncore.Value{}, ksErr(mongoerr.Location50823, "Expected decimal continuation.")
		}
		if scaledBin < 0x1p-1022*kTinyDoubleExponentUpshift {
			// The double would be subnormal: scale in the decimal domain, rounding down as
			// the encoder did.
			dec = decimalFromDouble(scaledBin, 34, roundTowardZero).
				multiply(tinyDoubleExponentDownshiftFactorAsDecimal(), roundTowardZero)
		} else {
			dec = decimalFromDouble(scaledBin*kTinyDoubleExponentDownshft, 34, roundTowardPositive)
		}
	default: // magnitude in [2**-255, 1): the common case
		dcm := int(encoded & 3)
		bin := math.Float64frombits(encoded >> 2)
		if orig == tbDouble {
			if dcm != dcmEqualToDouble {
				return bsoncore.Value{}, ksErr(mongoerr.Location50824, "Decimal contuation mismatch.")
			}
			return bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, sign(bin))}, nil
		}
		if orig != tbDecimal {
			return bsoncore.Value{}, ksErr(mongoerr.Location50825, "Unexpected type for small number, expected decimal.")
		}
		switch dcm {
		case dcmEqualToDoubleRoundedUpTo15Digits:
			return finishDecimal(tb, decimalFromDouble(bin, 15, roundTowardPositive), negative)
		case dcmEqualToDouble:
			return finishDecimal(tb, decimalFromDouble(bin, 34, roundTowardPositive), negative)
		}
		dec = decimalFromDouble(bin, 34, roundTowardPositive)
	}
	dec, err = readDecimalContinuation(r, inverted, dec)
	if err != nil {
		return bsoncore.Value{}, err
	}
	return finishDecimal(tb, dec, negative)
}

// finishDecimal negates dec if needed and restores its exponent from the type bits.
func finishDecimal(tb *typeBitsReader, dec decimal128, negative bool) (bsoncore.Value, error) {
	if negative {
		dec = dec.negate()
	}
	dec, err := adjustDecimalExponent(tb, dec)
	if err != nil {
		return bsoncore.Value{}, err
	}
	return decimalValue(dec), nil
}

func readInt(ctype byte, r *ksReader, tb *typeBitsReader, inverted bool) (bsoncore.Value, error) {
	negative := ctype <= ctNumericNeg1ByteInt
	var nbytes int
	if negative {
		inverted = !inverted
		nbytes = ctNumericNeg1ByteInt - int(ctype) + 1
	} else {
		nbytes = int(ctype) - ctNumericPos1ByteInt + 1
	}
	orig, err := tb.readNumeric()
	if err != nil {
		return bsoncore.Value{}, err
	}
	var encodedIntegerPart uint64
	for range nbytes {
		c, err := r.readByte(inverted)
		if err != nil {
			return bsoncore.Value{}, err
		}
		encodedIntegerPart = encodedIntegerPart<<8 | uint64(c)
	}
	integerPart := int64(encodedIntegerPart >> 1)
	if encodedIntegerPart&1 == 0 {
		if negative {
			integerPart = -integerPart
		}
		switch orig {
		case tbDouble:
			return bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, float64(integerPart))}, nil
		case tbInt:
			return bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, int32(integerPart))}, nil
		case tbLong:
			return bsoncore.Value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, integerPart)}, nil
		}
		dec, err := adjustDecimalExponent(tb, decimalFromInt64(integerPart))
		if err != nil {
			return bsoncore.Value{}, err
		}
		return decimalValue(dec), nil
	}
	// KeyString V1: a fraction fills the rest of 8 bytes.
	fracBytes := 8 - nbytes
	encodedFraction := uint64(integerPart)
	for range fracBytes {
		c, err := r.readByte(inverted)
		if err != nil {
			return bsoncore.Value{}, err
		}
		encodedFraction = encodedFraction<<8 | uint64(c)
	}
	bin := float64(encodedFraction&^3) * math.Ldexp(1, -8*fracBytes)
	if orig == tbDouble {
		if negative {
			bin = -bin
		}
		return bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, bin)}, nil
	}
	if orig != tbDecimal {
		return bsoncore.Value{}, ksErr(mongoerr.Location50810, "Expected type Decimal.")
	}
	dcm := dcmHasContinuationLargerThanDouble
	if fracBytes > 0 {
		dcm = int(encodedFraction & 3)
	}
	var dec decimal128
	switch dcm {
	case dcmEqualToDoubleRoundedUpTo15Digits:
		dec = decimalFromDouble(bin, 15, roundTowardPositive)
	case dcmEqualToDouble:
		dec = decimalFromDouble(bin, 34, roundTowardPositive)
	default:
		if float64(integerPart) > kMaxIntForDouble {
			dec = decimalFromInt64(integerPart)
		} else {
			dec = decimalFromDouble(bin, 34, roundTowardPositive)
		}
		if dec, err = readDecimalContinuation(r, inverted, dec); err != nil {
			return bsoncore.Value{}, err
		}
	}
	return finishDecimal(tb, dec, negative)
}
