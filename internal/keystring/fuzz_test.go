package keystring

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/bsonutil/bsontest"
	"humongo/internal/recordid"
)

// seedKeys returns real keys (with TypeBits) to start the fuzzers from.
func seedKeys() (keys, tbs [][]byte, ords []Ordering) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 40; i++ {
		ord := Ordering(r.IntN(4))
		vs := []bsoncore.Value{bsontest.RandomValue(r, 2), bsontest.RandomValue(r, 2)}
		var rid recordid.ID
		switch i % 3 {
		case 0:
			rid = recordid.Long(int64(i) - 20)
		case 1:
			rid = recordid.Binary([]byte{0, byte(i), 0})
		}
		ks, tb := Encode(vs, ord, rid)
		keys, tbs, ords = append(keys, ks), append(tbs, tb), append(ords, ord)
	}
	return keys, tbs, ords
}

// FuzzDecode feeds arbitrary bytes as KeyString and TypeBits to Decode and
// DecodeRecordIDAtEnd: they must return (an error or values) without panicking or hanging, and
// whatever Decode returns must be valid BSON that encodes again.
func FuzzDecode(f *testing.F) {
	keys, tbs, ords := seedKeys()
	for i := range keys {
		f.Add(keys[i], tbs[i], uint32(ords[i]))
	}
	f.Add([]byte{}, []byte{}, uint32(0))
	f.Add([]byte{ctNumPosLarge, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, kEnd}, []byte{3}, uint32(0))
	f.Fuzz(func(t *testing.T, ks, tb []byte, ord uint32) {
		vals, err := Decode(ks, Ordering(ord), tb)
		if err == nil {
			var b Builder
			b.Reset(Ordering(ord))
			for _, v := range vals {
				if v.Type != 0 {
					if verr := v.Validate(); verr != nil {
						t.Fatalf("Decode(%x, %x) returned invalid BSON %s %x: %v", ks, tb, v.Type, v.Data, verr)
					}
				}
				b.AppendValue(v)
			}
			if b.Err() != nil {
				t.Fatalf("decoded values do not encode: %v", b.Err())
			}
		}
		if id, n, err := DecodeRecordIDAtEnd(ks); err == nil {
			if n < 0 || n > len(ks) {
				t.Fatalf("DecodeRecordIDAtEnd(%x) length %d out of range", ks, n)
			}
			// A decoded id re-encodes to the same suffix.
			if got := appendRecordID(nil, id); !bytes.Equal(got, ks[n:]) && id.IsLong() == false {
				t.Fatalf("binary RecordId %v re-encodes to %x, suffix was %x", id, got, ks[n:])
			}
		}
	})
}

// FuzzRoundTrip encodes the values of fuzzed BSON documents: valid values must decode to their
// exact bytes, and the keys of the first two values must order as bsonutil.Compare does.
func FuzzRoundTrip(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 10))
	for i := 0; i < 30; i++ {
		f.Add([]byte(bsontest.D("a", bsontest.RandomValue(r, 3), "b", bsontest.RandomValue(r, 3))), uint32(i%4))
	}
	f.Fuzz(func(t *testing.T, doc []byte, ord uint32) {
		if bsoncore.Document(doc).Validate() != nil {
			return
		}
		elems, err := bsoncore.Document(doc).Elements()
		if err != nil {
			return
		}
		vals := make([]bsoncore.Value, 0, len(elems))
		for _, e := range elems {
			vals = append(vals, e.Value())
		}
		var b Builder
		b.Reset(Ordering(ord))
		for _, v := range vals {
			b.AppendValue(v)
		}
		if b.Err() != nil {
			return // e.g. nesting deeper than maxDepth
		}
		// Exact bytes are checked by the property tests on generated values; fuzzed BSON may
		// hold arrays with non-positional keys or booleans other than 0/1, which decode in
		// canonical form. So here: decoding succeeds, decoded values equal the originals in
		// BSON order, and encode to the very same key and TypeBits.
		ks, tb := bytes.Clone(b.Bytes()), bytes.Clone(b.TypeBits())
		got, err := Decode(ks, Ordering(ord), tb)
		if err != nil || len(got) != len(vals) {
			t.Fatalf("Decode(%x, %x) = %d values, %v; want %d", ks, tb, len(got), err, len(vals))
		}
		b.Reset(Ordering(ord))
		for i, v := range got {
			if bsonutil.Compare(v, vals[i]) != 0 {
				t.Fatalf("component %d decodes to %s, want %s", i, v, vals[i])
			}
			b.AppendValue(v)
		}
		if !bytes.Equal(b.Bytes(), ks) || !bytes.Equal(b.TypeBits(), tb) {
			t.Fatalf("re-encoding changed the key: %x/%x -> %x/%x", ks, tb, b.Bytes(), b.TypeBits())
		}
		if len(vals) >= 2 {
			ka, _ := Encode(vals[:1], 0, recordid.ID{})
			kb, _ := Encode(vals[1:2], 0, recordid.ID{})
			if got, want := sign(bytes.Compare(ka, kb)), bsonutil.Compare(vals[0], vals[1]); got != want {
				t.Fatalf("%s vs %s: KeyString order %d, BSON order %d", vals[0], vals[1], got, want)
			}
		}
	})
}
