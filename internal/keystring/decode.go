package keystring

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// Decode returns the components of KeyString ks, built with ordering ord, restored to their
// exact original BSON types and bytes with typeBits (nil means every value has its default
// type: double, string, null). Decoding stops at the end of the key (kEnd, after an optional
// discriminator): a RecordId suffix, if any, is ignored. Corrupt input returns a
// DataCorruptionDetected error; Decode never panics and runs in time linear in its input.
func Decode(ks []byte, ord Ordering, typeBits []byte) ([]bsoncore.Value, error) {
	d := decoder{ks: ks, tb: typeBits}
	// All values are decoded into one buffer (the BSON is rarely longer than twice the key);
	// slices are cut once it has stopped growing.
	buf := make([]byte, 0, 2*len(ks))
	var types []bsoncore.Type
	var ends []int
	for i := 0; ; i++ {
		if d.pos >= len(ks) {
			return nil, corrupt("key has no end marker")
		}
		switch ks[d.pos] {
		case kLess, kGreater:
			d.pos++
			if d.pos >= len(ks) || ks[d.pos] != kEnd {
				return nil, corrupt("discriminator not followed by the end marker")
			}
			fallthrough
		case kEnd:
			if d.tbPos < len(d.tb) {
				return nil, corrupt("TypeBits has entries left over")
			}
			out := make([]bsoncore.Value, len(types))
			start := 0
			for j, t := range types {
				out[j] = bsoncore.Value{Type: t, Data: buf[start:ends[j]:ends[j]]}
				start = ends[j]
			}
			return out, nil
		}
		d.mask = 0
		if ord.descending(i) {
			d.mask = 0xFF
		}
		ct, err := d.byte()
		if err != nil {
			return nil, err
		}
		var t bsoncore.Type
		t, buf, err = d.value(ct, buf, 0)
		if err != nil {
			return nil, err
		}
		types, ends = append(types, t), append(ends, len(buf))
	}
}

type decoder struct {
	ks    []byte
	pos   int
	mask  byte // 0xFF while decoding a descending component
	tb    []byte
	tbPos int
}

func corrupt(msg string) error {
	return mongoerr.New(mongoerr.DataCorruptionDetected, "keystring: corrupt key: "+msg)
}

var errTruncated = corrupt("truncated")

func (d *decoder) byte() (byte, error) {
	if d.pos >= len(d.ks) {
		return 0, errTruncated
	}
	c := d.ks[d.pos] ^ d.mask
	d.pos++
	return c, nil
}

// raw returns the next n bytes as stored (not unmasked).
func (d *decoder) raw(n int) ([]byte, error) {
	if n < 0 || n > len(d.ks)-d.pos {
		return nil, errTruncated
	}
	p := d.ks[d.pos : d.pos+n]
	d.pos += n
	return p, nil
}

// appendUnmasked appends the next n bytes, unmasked, to dst.
func (d *decoder) appendUnmasked(dst []byte, n int) ([]byte, error) {
	p, err := d.raw(n)
	if err != nil {
		return nil, err
	}
	for _, c := range p {
		dst = append(dst, c^d.mask)
	}
	return dst, nil
}

// uintN reads n (<= 8) bytes big-endian, xored with mask.
func (d *decoder) uintN(n int, mask byte) (uint64, error) {
	p, err := d.raw(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range p {
		v = v<<8 | uint64(c^mask)
	}
	return v, nil
}

// typeBit returns the next TypeBits tag; past the end every tag is the default 0.
func (d *decoder) typeBit() byte {
	if d.tbPos >= len(d.tb) {
		return 0
	}
	t := d.tb[d.tbPos]
	d.tbPos++
	return t
}

func (d *decoder) typeBitsPayload(n int) ([]byte, error) {
	if n > len(d.tb)-d.tbPos {
		return nil, corrupt("TypeBits truncated")
	}
	p := d.tb[d.tbPos : d.tbPos+n]
	d.tbPos += n
	return p, nil
}

// cstring appends unmasked bytes up to (not including) a 0 byte and consumes the 0.
func (d *decoder) cstring(dst []byte) ([]byte, error) {
	for {
		c, err := d.byte()
		if err != nil {
			return nil, err
		}
		if c == 0 {
			return dst, nil
		}
		dst = append(dst, c)
	}
}

// escaped appends the unescaped bytes of an appendEscaped string to dst.
func (d *decoder) escaped(dst []byte) ([]byte, error) {
	for {
		c, err := d.byte()
		if err != nil {
			return nil, err
		}
		if c != 0 {
			dst = append(dst, c)
			continue
		}
		if d.pos < len(d.ks) && d.ks[d.pos]^d.mask == 0xFF {
			d.pos++
			dst = append(dst, 0)
			continue
		}
		return dst, nil
	}
}

// bsonString appends the string read by escaped as a BSON string (length, bytes, NUL).
func (d *decoder) bsonString(dst []byte) ([]byte, error) {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst, err := d.escaped(dst)
	if err != nil {
		return nil, err
	}
	n := len(dst) - at - 4
	if n >= math.MaxInt32 {
		return nil, corrupt("string too long")
	}
	binary.LittleEndian.PutUint32(dst[at:], uint32(n+1))
	return append(dst, 0), nil
}

// value decodes the value whose CType ct was just read, appending its BSON data to dst.
func (d *decoder) value(ct byte, dst []byte, depth int) (bsoncore.Type, []byte, error) {
	if depth > maxDepth {
		return 0, nil, corrupt("nested too deeply")
	}
	var err error
	switch {
	case ct == ctMinKey:
		return bsoncore.TypeMinKey, dst, nil
	case ct == ctMaxKey:
		return bsoncore.TypeMaxKey, dst, nil
	case ct == ctUndefined:
		return bsoncore.TypeUndefined, dst, nil
	case ct == ctNullish:
		switch d.typeBit() {
		case tbNull:
			return bsoncore.TypeNull, dst, nil
		case tbEOO:
			return 0, dst, nil
		}
		return 0, nil, corrupt("bad TypeBits for null")
	case ct >= ctNumNaN && ct <= ctNumPosLarge:
		return d.number(ct, dst)
	case ct == ctStringLike:
		t := bsoncore.TypeString
		switch d.typeBit() {
		case tbString:
		case tbSymbol:
			t = bsoncore.TypeSymbol
		default:
			return 0, nil, corrupt("bad TypeBits for a string")
		}
		dst, err = d.bsonString(dst)
		return t, dst, err
	case ct == ctCode:
		dst, err = d.bsonString(dst)
		return bsoncore.TypeJavaScript, dst, err
	case ct == ctObject:
		dst, err = d.objectBody(dst, depth)
		return bsoncore.TypeEmbeddedDocument, dst, err
	case ct == ctArray:
		idx, dst := bsoncore.ReserveLength(dst)
		for i := 0; ; i++ {
			c, err := d.byte()
			if err != nil {
				return 0, nil, err
			}
			if c == 0 {
				break
			}
			at := len(dst)
			dst = append(dst, 0)
			dst = strconv.AppendInt(dst, int64(i), 10)
			dst = append(dst, 0)
			var t bsoncore.Type
			t, dst, err = d.value(c, dst, depth+1)
			if err != nil {
				return 0, nil, err
			}
			if t == 0 {
				return 0, nil, corrupt("missing value inside an array")
			}
			dst[at] = byte(t)
		}
		dst, err = finishDocument(dst, idx)
		return bsoncore.TypeArray, dst, err
	case ct == ctBinData:
		c, err := d.byte()
		if err != nil {
			return 0, nil, err
		}
		n := uint64(c)
		if c == 0xFF {
			if n, err = d.uintN(4, d.mask); err != nil {
				return 0, nil, err
			}
			if n > math.MaxInt32-5 {
				return 0, nil, corrupt("binData too long")
			}
		}
		dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
		dst, err = d.appendUnmasked(dst, int(n)+1) // subtype and bytes
		return bsoncore.TypeBinary, dst, err
	case ct == ctOID:
		dst, err = d.appendUnmasked(dst, 12)
		return bsoncore.TypeObjectID, dst, err
	case ct == ctBoolFalse:
		return bsoncore.TypeBoolean, append(dst, 0), nil
	case ct == ctBoolTrue:
		return bsoncore.TypeBoolean, append(dst, 1), nil
	case ct == ctDate:
		v, err := d.uintN(8, d.mask)
		if err != nil {
			return 0, nil, err
		}
		return bsoncore.TypeDateTime, binary.LittleEndian.AppendUint64(dst, v^(1<<63)), nil
	case ct == ctTimestamp:
		v, err := d.uintN(8, d.mask)
		if err != nil {
			return 0, nil, err
		}
		return bsoncore.TypeTimestamp, binary.LittleEndian.AppendUint64(dst, v), nil
	case ct == ctRegEx:
		if dst, err = d.cstring(dst); err != nil {
			return 0, nil, err
		}
		dst = append(dst, 0)
		if dst, err = d.cstring(dst); err != nil {
			return 0, nil, err
		}
		return bsoncore.TypeRegex, append(dst, 0), nil
	case ct == ctDBRef:
		n, err := d.uintN(4, d.mask)
		if err != nil {
			return 0, nil, err
		}
		if n > math.MaxInt32-13 {
			return 0, nil, corrupt("dbPointer namespace too long")
		}
		dst = binary.LittleEndian.AppendUint32(dst, uint32(n+1))
		if dst, err = d.appendUnmasked(dst, int(n)); err != nil {
			return 0, nil, err
		}
		dst = append(dst, 0)
		dst, err = d.appendUnmasked(dst, 12)
		return bsoncore.TypeDBPointer, dst, err
	case ct == ctCodeWScope:
		idx, dst := bsoncore.ReserveLength(dst)
		if dst, err = d.bsonString(dst); err != nil {
			return 0, nil, err
		}
		if dst, err = d.objectBody(dst, depth); err != nil {
			return 0, nil, err
		}
		dst, err = finishDocument(dst, idx)
		if err == nil {
			dst = dst[:len(dst)-1] // finishDocument added a document terminator; CodeWScope has none
			binary.LittleEndian.PutUint32(dst[idx:], uint32(len(dst)-int(idx)))
		}
		return bsoncore.TypeCodeWithScope, dst, err
	}
	return 0, nil, corrupt("unknown CType " + strconv.Itoa(int(ct)))
}

// objectBody decodes the fields of an object up to its 0 terminator as a BSON document.
func (d *decoder) objectBody(dst []byte, depth int) ([]byte, error) {
	idx, dst := bsoncore.ReserveLength(dst)
	for {
		gct, err := d.byte()
		if err != nil {
			return nil, err
		}
		if gct == 0 {
			break
		}
		at := len(dst)
		dst = append(dst, 0)
		if dst, err = d.cstring(dst); err != nil {
			return nil, err
		}
		dst = append(dst, 0)
		ct, err := d.byte()
		if err != nil {
			return nil, err
		}
		var t bsoncore.Type
		t, dst, err = d.value(ct, dst, depth+1)
		if err != nil {
			return nil, err
		}
		if g, ok := genericCType(t); !ok || g != gct {
			return nil, corrupt("field type does not match its value")
		}
		dst[at] = byte(t)
	}
	return finishDocument(dst, idx)
}

// finishDocument appends the terminator and fills in the length reserved at idx.
func finishDocument(dst []byte, idx int32) ([]byte, error) {
	dst = append(dst, 0)
	if len(dst)-int(idx) > math.MaxInt32 {
		return nil, corrupt("document too long")
	}
	return bsoncore.UpdateLength(dst, idx, int32(len(dst)-int(idx))), nil
}

// number decodes a numeric value (CType in [ctNumNaN, ctNumPosLarge]).
func (d *decoder) number(ct byte, dst []byte) (bsoncore.Type, []byte, error) {
	tag := d.typeBit()
	if tag == tbDecimal {
		// TypeBits hold the exact decimal; the key part must still be consumed.
		raw, err := d.typeBitsPayload(16)
		if err != nil {
			return 0, nil, err
		}
		if _, err := d.magnitude(ct); err != nil {
			return 0, nil, err
		}
		return bsoncore.TypeDecimal128, append(dst, raw...), nil
	}
	switch ct {
	case ctNumNaN:
		switch tag {
		case tbDouble:
			return bsoncore.TypeDouble, binary.LittleEndian.AppendUint64(dst, canonicalNaN), nil
		case tbDoubleBits:
			raw, err := d.typeBitsPayload(8)
			if err != nil {
				return 0, nil, err
			}
			return bsoncore.TypeDouble, append(dst, raw...), nil
		}
		return 0, nil, corrupt("bad TypeBits for NaN")
	case ctNumZero:
		switch tag {
		case tbDouble:
			return bsoncore.TypeDouble, binary.LittleEndian.AppendUint64(dst, 0), nil
		case tbNegZero:
			return bsoncore.TypeDouble, binary.LittleEndian.AppendUint64(dst, 1<<63), nil
		case tbInt32:
			return bsoncore.TypeInt32, binary.LittleEndian.AppendUint32(dst, 0), nil
		case tbInt64:
			return bsoncore.TypeInt64, binary.LittleEndian.AppendUint64(dst, 0), nil
		}
		return 0, nil, corrupt("bad TypeBits for zero")
	}
	m, err := d.magnitude(ct)
	if err != nil {
		return 0, nil, err
	}
	if m.cont != nil {
		// Only a decimal has a continuation. Without its TypeBits, rebuild the decimal from the
		// exact value in the continuation.
		if tag != tbDouble {
			return 0, nil, corrupt("decimal continuation with a non-decimal type")
		}
		hi, lo, err := decimalFromCont(m.neg, m.cont)
		if err != nil {
			return 0, nil, err
		}
		dst = binary.LittleEndian.AppendUint64(dst, lo)
		return bsoncore.TypeDecimal128, binary.LittleEndian.AppendUint64(dst, hi), nil
	}
	switch tag {
	case tbDouble:
		f := m.float()
		return bsoncore.TypeDouble, binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), nil
	case tbInt32, tbInt64:
		var n int64
		switch {
		case m.isInt && !m.hasFrac && !m.neg:
			n = int64(m.intPart) // intPart < 2^63 by construction
		case m.isInt && !m.hasFrac:
			n = -int64(m.intPart)
		case !m.isInt && m.neg && m.dbits == math.Float64bits(1<<63):
			n = math.MinInt64
		default:
			return 0, nil, corrupt("integer TypeBits on a non-integer key")
		}
		if tag == tbInt64 {
			return bsoncore.TypeInt64, binary.LittleEndian.AppendUint64(dst, uint64(n)), nil
		}
		if n != int64(int32(n)) {
			return 0, nil, corrupt("int32 TypeBits on a value out of int32 range")
		}
		return bsoncore.TypeInt32, binary.LittleEndian.AppendUint32(dst, uint32(int32(n))), nil
	}
	return 0, nil, corrupt("bad TypeBits for a number")
}

// magnitudeParts is a decoded numeric key.
type magnitudeParts struct {
	neg     bool
	isInt   bool   // integer-range CType: intPart and frac are set; otherwise dbits
	intPart uint64 // in [1, 2^63)
	hasFrac bool
	frac    uint64 // fraction scaled by 2^fracBits(n)
	n       int    // integer word length
	dbits   uint64 // IEEE bits of the magnitude (small and large CTypes)
	cont    []byte // decimal continuation (masked bytes unmasked), or nil
}

// magnitude reads the bytes after a numeric CType (NaN and zero have none).
func (d *decoder) magnitude(ct byte) (magnitudeParts, error) {
	var m magnitudeParts
	if ct == ctNumNaN || ct == ctNumZero {
		return m, nil
	}
	m.neg = ct < ctNumZero
	mask := d.mask
	if m.neg {
		mask ^= 0xFF
	}
	hasCont := false
	switch ct {
	case ctNumNegLarg, ctNumPosLarge, ctNumNegSmall, ctNumPosSmall:
		w, err := d.uintN(8, mask)
		if err != nil {
			return m, err
		}
		m.dbits, hasCont = w>>1, w&1 != 0
		large := ct == ctNumNegLarg || ct == ctNumPosLarge
		if f := math.Float64frombits(m.dbits); f != f || large && f < 1<<63 || !large && f >= 1 {
			return m, corrupt("number out of the range of its CType")
		}
	default:
		m.isInt = true
		if m.neg {
			m.n = ctNumNegSmall - int(ct)
		} else {
			m.n = int(ct) - ctNumPosSmall
		}
		v, err := d.uintN(m.n, mask)
		if err != nil {
			return m, err
		}
		m.intPart, m.hasFrac = v>>1, v&1 != 0
		if m.intPart == 0 {
			return m, corrupt("zero integer part in an integer CType")
		}
		if m.hasFrac {
			if m.n < 8 {
				w, err := d.uintN(8-m.n, mask)
				if err != nil {
					return m, err
				}
				m.frac, hasCont = w>>1, w&1 != 0
			} else {
				hasCont = true
			}
		}
	}
	if hasCont {
		p, err := d.raw(contLen)
		if err != nil {
			return m, err
		}
		m.cont = make([]byte, contLen)
		for i, c := range p {
			m.cont[i] = c ^ mask
		}
	}
	return m, nil
}

// float returns the double the key stands for (exact for keys of doubles).
func (m magnitudeParts) float() float64 {
	var f float64
	if m.isInt {
		f = float64(m.intPart)
		if m.hasFrac && m.n < 8 {
			f += math.Ldexp(float64(m.frac), -fracBits(m.n))
		}
	} else {
		f = math.Float64frombits(m.dbits)
	}
	if m.neg {
		f = -f
	}
	return f
}

// decimalFromCont rebuilds a decimal128 (in its shortest cohort member) from a continuation.
func decimalFromCont(neg bool, cont []byte) (hi, lo uint64, err error) {
	q := int(binary.BigEndian.Uint16(cont)) - contExpBias
	// 15-byte coefficient as a 128-bit number.
	chi := uint64(0)
	for _, c := range cont[2:9] {
		chi = chi<<8 | uint64(c)
	}
	clo := binary.BigEndian.Uint64(cont[9:])
	if chi == 0 && clo == 0 {
		return 0, 0, corrupt("zero decimal continuation")
	}
	for q < decMaxExp {
		qh, r := bits.Div64(0, chi, 10)
		ql, r2 := bits.Div64(r, clo, 10)
		if r2 != 0 {
			break
		}
		chi, clo, q = qh, ql, q+1
	}
	const maxHi, maxLo = 0x1ed09bead87c0, 0x378d8e63ffffffff // 10^34-1
	if q < decMinExp || q > decMaxExp || chi > maxHi || chi == maxHi && clo > maxLo {
		return 0, 0, corrupt("decimal continuation out of range")
	}
	hi = uint64(q+decExpBias)<<49 | chi
	if neg {
		hi |= 1 << 63
	}
	return hi, clo, nil
}
