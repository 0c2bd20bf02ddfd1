package index

import (
	"crypto/md5"
	"encoding/binary"
	"hash"
	"math"
	"math/big"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// DefaultHashSeed is the seed MongoDB's hashed indexes and hashed shard keys use
// (BSONElementHasher::DEFAULT_HASH_SEED).
const DefaultHashSeed int32 = 0

// Hash64 is MongoDB's BSONElementHasher::hash64: the first 8 bytes (little-endian) of the MD5
// of seed (int32 LE) followed by the element hashed recursively:
//
//   - canonical type (int32 LE; all numbers share 10, string and symbol share 15, ...),
//   - for embedded elements only, the field name with its NUL,
//   - numbers as int64 LE after safeNumberLongForHash (truncation toward zero; NaN -> 0;
//     exactly 2^63 -> MinInt64, the legacy x86 result; larger -> MaxInt64; below -2^63 ->
//     MinInt64), so 3, NumberLong(3) and 3.1 hash alike, as MongoDB documents;
//   - other scalars as their raw BSON value bytes;
//   - objects and arrays as their elements in order, each hashed with its field name, and
//     then the terminating EOO (its canonical type 0 only);
//   - code with scope as the code string (with NUL) then the scope object.
//
// Compatibility matters: hashed shard key chunk ranges computed by MongoDB must match ours.
// hash_test.go pins the values of MongoDB's jstests/core/hashing/hash_test (seed 1).
func Hash64(v bsoncore.Value, seed int32) (int64, error) {
	h := md5.New()
	var buf [8]byte
	binary.LittleEndian.PutUint32(buf[:4], uint32(seed))
	h.Write(buf[:4])
	if err := hashValue(h, v.Type, v.Data, 0); err != nil {
		return 0, err
	}
	var sum [md5.Size]byte
	return int64(binary.LittleEndian.Uint64(h.Sum(sum[:0])[:8])), nil
}

// canonicalType is MongoDB's canonicalizeBSONType.
func canonicalType(t bsoncore.Type) int32 {
	switch t {
	case bsoncore.TypeMinKey:
		return -1
	case bsoncore.TypeMaxKey:
		return 127
	case 0, bsoncore.TypeUndefined:
		return 0
	case bsoncore.TypeNull:
		return 5
	case bsoncore.TypeDouble, bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDecimal128:
		return 10
	case bsoncore.TypeString, bsoncore.TypeSymbol:
		return 15
	case bsoncore.TypeEmbeddedDocument:
		return 20
	case bsoncore.TypeArray:
		return 25
	case bsoncore.TypeBinary:
		return 30
	case bsoncore.TypeObjectID:
		return 35
	case bsoncore.TypeBoolean:
		return 40
	case bsoncore.TypeDateTime:
		return 45
	case bsoncore.TypeTimestamp:
		return 47
	case bsoncore.TypeRegex:
		return 50
	case bsoncore.TypeDBPointer:
		return 55
	case bsoncore.TypeJavaScript:
		return 60
	case bsoncore.TypeCodeWithScope:
		return 65
	}
	return -2 // unknown types are rejected before hashing
}

func writeInt32(h hash.Hash, n int32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(n))
	h.Write(b[:])
}

func hashValue(h hash.Hash, t bsoncore.Type, data []byte, depth int) error {
	ct := canonicalType(t)
	if ct == -2 {
		return errCorruptBSON
	}
	writeInt32(h, ct)
	return hashValueBody(h, t, data, depth)
}

// maxHashDepth bounds recursion on hostile input; real documents nest at most ~100 levels.
const maxHashDepth = 200

func hashValueBody(h hash.Hash, t bsoncore.Type, data []byte, depth int) error {
	if depth > maxHashDepth {
		return errCorruptBSON
	}
	switch t {
	case bsoncore.TypeDouble, bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDecimal128:
		n, err := numberLongForHash(bsoncore.Value{Type: t, Data: data})
		if err != nil {
			return err
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(n))
		h.Write(b[:])
		return nil
	case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
		return hashElements(h, data, depth+1)
	case bsoncore.TypeCodeWithScope:
		code, scope, _, ok := bsoncore.ReadCodeWithScope(data)
		if !ok {
			return errCorruptBSON
		}
		h.Write([]byte(code))
		h.Write([]byte{0})
		return hashElements(h, scope, depth+1)
	}
	h.Write(data)
	return nil
}

// hashElements hashes each element of a document or array with its name, then the EOO.
func hashElements(h hash.Hash, doc []byte, depth int) error {
	it, err := newElemIter(doc)
	if err != nil {
		return err
	}
	for {
		name, v, ok, err := it.next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		ct := canonicalType(v.Type)
		if ct == -2 {
			return errCorruptBSON
		}
		writeInt32(h, ct)
		h.Write(name)
		h.Write([]byte{0})
		if err := hashValueBody(h, v.Type, v.Data, depth); err != nil {
			return err
		}
	}
	// EOO: its canonical type (0) only. MongoDB iterates with moreWithEOO and hashes the EOO
	// element too; its field name and value are empty. (Pinned by the {a: 1, b: 2} answer.)
	writeInt32(h, 0)
	return nil
}

// numberLongForHash is BSONElement::safeNumberLongForHash.
func numberLongForHash(v bsoncore.Value) (int64, error) {
	switch v.Type {
	case bsoncore.TypeInt32:
		n, _, ok := bsoncore.ReadInt32(v.Data)
		if !ok {
			return 0, errCorruptBSON
		}
		return int64(n), nil
	case bsoncore.TypeInt64:
		n, _, ok := bsoncore.ReadInt64(v.Data)
		if !ok {
			return 0, errCorruptBSON
		}
		return n, nil
	case bsoncore.TypeDouble:
		d, _, ok := bsoncore.ReadDouble(v.Data)
		if !ok {
			return 0, errCorruptBSON
		}
		return doubleToLongForHash(d), nil
	case bsoncore.TypeDecimal128:
		hi, lo, _, ok := bsoncore.ReadDecimal128(v.Data)
		if !ok {
			return 0, errCorruptBSON
		}
		return decimalToLongForHash(bson.NewDecimal128(hi, lo)), nil
	}
	return 0, errCorruptBSON
}

const twoTo63 = 9223372036854775808.0

func doubleToLongForHash(d float64) int64 {
	switch {
	case math.IsNaN(d):
		return 0
	case d == twoTo63:
		// SERVER-37183: preserved legacy result of the x86 conversion.
		return math.MinInt64
	case d > twoTo63:
		return math.MaxInt64
	case d < -twoTo63:
		return math.MinInt64
	}
	return int64(d) // truncation toward zero
}

// decimalToLongForHash converts like Decimal128::toLong (round half to even), clamping out of
// range values; NaN hashes as 0 like a double NaN.
func decimalToLongForHash(d bson.Decimal128) int64 {
	coef, exp, err := d.BigInt()
	if err != nil {
		// NaN or infinity.
		s := d.String()
		switch s {
		case "Infinity":
			return math.MaxInt64
		case "-Infinity":
			return math.MinInt64
		}
		return 0
	}
	r := new(big.Int).Set(coef)
	if exp > 0 {
		if exp > 40 {
			if r.Sign() > 0 {
				return math.MaxInt64
			} else if r.Sign() < 0 {
				return math.MinInt64
			}
			return 0
		}
		r.Mul(r, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(exp)), nil))
	} else if exp < 0 {
		if exp < -40 {
			return 0
		}
		div := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-exp)), nil)
		q, m := new(big.Int).QuoRem(r, div, new(big.Int))
		// Round half to even on the remainder.
		m2 := new(big.Int).Abs(m)
		m2.Lsh(m2, 1)
		c := m2.Cmp(div)
		if c > 0 || (c == 0 && q.Bit(0) == 1) {
			if r.Sign() < 0 {
				q.Sub(q, big.NewInt(1))
			} else {
				q.Add(q, big.NewInt(1))
			}
		}
		r = q
	}
	if !r.IsInt64() {
		if r.Sign() > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return r.Int64()
}
