// Package keystring implements KeyString, the binary-comparable encoding of index keys
// (spec/execution.md "KeyString"; checklist-execution.md §8). For BSON values x and y and any
// Ordering, bytes.Compare(ks(x), ks(y)) has the sign of bsonutil.Compare(x, y) (negated for a
// descending component), so indexes order keys with memcmp. TypeBits, stored beside the key,
// restore the exact original BSON bytes on Decode; a RecordId may be appended as a suffix that
// can be read from the end of the key.
//
// The layout follows MongoDB's key_string.cpp (index version 2, KeyString V1) in spirit: the
// same CType bytes, NUL escaping, object and array framing, discriminator and end bytes. Three
// places differ on purpose and keys are therefore not byte-compatible with MongoDB's: numbers
// (a simpler exact encoding, below), TypeBits (a byte per ambiguous value, not packed bits)
// and the RecordId suffix (see recordid.go).
//
// # Key layout
//
//	key        = component* [kLess | kGreater] kEnd [recordId]
//	component  = value, every byte inverted when the component is descending
//	value      = CType byte, then per type:
//	  MinKey 10, MaxKey 240               nothing
//	  undefined 15                        nothing (below null, as MongoDB's kUndefined)
//	  null / EOO 20                       nothing (TypeBits say which)
//	  numbers 30..51                      see Numbers
//	  string / symbol 60, code 160        bytes with 0x00 -> 0x00 0xFF, then 0x00
//	  object 70                           (generic CType, name, 0x00, value)* 0x00
//	  array 80                            value* 0x00
//	  binData 90                          length (1 byte, or 0xFF + 4 bytes BE), subtype, bytes
//	  ObjectId 100                        12 bytes
//	  false 110, true 111                 nothing
//	  date 120                            int64 BE with the sign bit flipped
//	  timestamp 130                       uint64 BE (seconds, increment)
//	  regex 140                           pattern 0x00 flags 0x00
//	  dbPointer 150                       namespace length (4 bytes BE), namespace, ObjectId
//	  codeWScope 170                      code as a string, then the scope as an object body
//
// An object field starts with the generic CType of its value (30 for every number, 20 for null
// and undefined) because BSON compares a field's canonical type before its name. Every CType c
// and its inverse 255-c lie in [10, 245]; the end bytes kLess=1 < kEnd=4 < kGreater=254 are
// never inverted, so a key built from a prefix of the components with ExclusiveBefore sorts
// before, and with ExclusiveAfter after, every key sharing that prefix. Keys stored in indexes
// end Inclusive (kEnd) followed by the RecordId; an Inclusive search key is a prefix of them.
//
// # Numbers
//
// int32, int64, double and decimal128 share one encoding of the exact mathematical value, so
// equal values of different types have identical keys and unequal ones order by value. The
// CType gives the sign and magnitude class; bytes after it are the magnitude, inverted for
// negative numbers:
//
//	30 NaN (every NaN)        nothing
//	31 / 51 |x| >= 2^63       w = bits(d)<<1 | c in 8 bytes, d = the double nearest |x| toward 0
//	32..39 / 43..50           |x| in [1, 2^63): integer word v = floor(|x|)<<1 | f in n bytes
//	                          (CType 42+n or 40-n, n = 1..8 minimal); if f, a fraction word
//	                          floor(frac*2^(63-8n))<<1 | c in 8-n bytes (none when n = 8, where
//	                          c is implied)
//	40 / 42 |x| in (0, 1)     w = bits(d)<<1 | c in 8 bytes (d may be 0 for tiny decimals)
//	41 zero                   nothing
//
// The top bit of a positive double's IEEE bits is 0, so the shift loses nothing, and IEEE bits
// order positive doubles. A double >= 1 has at most 52 fraction bits minus the bits of its
// integer part, at most 61-8n when the word needs n bytes, so its fraction always fits the
// 63-8n bits exactly: doubles and integers never need c. The flag c is set only for a decimal
// whose value is not exactly what the preceding bytes stand for; the key then continues with
// 17 bytes: the decimal's exact value as a normalized exponent (2 bytes) and 34-digit
// coefficient (15 bytes). Every value sharing the prefix lies strictly between it and the next
// representable prefix, and the continuation orders those exactly. Because c is inside a
// fixed-width word, the encoding stays prefix-free, which is what makes byte inversion (for
// negative numbers and descending components) reverse the order.
//
// Decimal128 keys are computed with math/big; every other type encodes without allocating.
//
// # TypeBits
//
// One entry per number, string-like and nullish value, in the order Decode meets them. Entry
// 0 is the default (double, string, null) and is what Decode assumes past the end of the
// TypeBits, so trailing defaults are dropped and TypeBits are empty for all-default keys.
// Numbers: 1 int32, 2 int64, 3 decimal128 followed by its 16 raw bytes (the key holds only the
// value; the raw bytes keep the cohort member such as 42.00, a zero's sign and exponent, NaN
// payloads and non-canonical encodings), 4 -0.0, 5 a non-canonical NaN double followed by its 8
// raw bytes. Strings: 1 symbol. Nullish: 2 EOO (the zero bsoncore.Value).
// Decoding without TypeBits yields doubles, strings and nulls (and a decimal rebuilt from the
// continuation when there is one).
//
// What is not restored exactly: arrays decode with positional field names ("0", "1", ...) and
// booleans as 0 or 1, whatever the original bytes held (both are what valid BSON contains).
package keystring
