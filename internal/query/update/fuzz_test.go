package update

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil/bsontest"
	"humongo/internal/mongoerr"
)

var fuzzFilter = bsontest.D("x", bsontest.Int32(1))

// checkApply runs one update against one document and checks the invariants every
// successful Apply must keep: no panic, valid BSON out, byte-identical when unchanged,
// deterministic.
func checkApply(t testing.TB, update, doc []byte, matched string) {
	opts := ParseOptions{Now: func() time.Time { return fixedNow }}
	if bytes.Contains(update, []byte("$[x]")) {
		opts.ArrayFilters = []bsoncore.Document{fuzzFilter}
	}
	u, err := Parse(update, opts)
	if err != nil {
		requireCode(t, err)
		return
	}
	ctx := ApplyContext{MatchedArrayIndex: matched, Validate: true}
	got, changed, err := u.Apply(doc, ctx)
	if err != nil {
		requireCode(t, err)
		return
	}
	if verr := got.Validate(); verr != nil {
		t.Fatalf("invalid result %v\nupdate %s\ndoc %s", verr, show(update), show(doc))
	}
	if !changed && !bytes.Equal(got, doc[:len(got)]) {
		t.Fatalf("unchanged but different: %s vs %s", show(got), show(doc))
	}
	again, changed2, err := u.Apply(doc, ctx)
	if err != nil || changed2 != changed || !bytes.Equal(again, got) {
		t.Fatalf("not deterministic: %v", err)
	}
	doc = doc[:binary.LittleEndian.Uint32(doc)]
	if oldID, had := topLevelField(doc, "_id"); had {
		newID, _ := topLevelField(got, "_id")
		if oldID.Type != newID.Type || !bytes.Equal(oldID.Data, newID.Data) {
			t.Fatalf("_id changed: %s -> %s", show(doc), show(got))
		}
	}
}

// requireCode fails unless err carries a MongoDB code: nothing reaches the client as a bare
// InternalError.
func requireCode(t testing.TB, err error) {
	if c := mongoerr.CodeOf(err); c == mongoerr.InternalError {
		t.Fatalf("error without a code: %v", err)
	}
}

func FuzzParseApply(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 64; i++ {
		f.Add([]byte(randomUpdate(r)), []byte(randomDoc(r)), "0")
	}
	f.Add([]byte(bsontest.D("$set", bsontest.D("a.$[x]", bsontest.Int32(1)))), []byte(bsontest.D("a", bsontest.Arr(bsontest.Int32(1)))), "")
	f.Fuzz(func(t *testing.T, update, doc []byte, matched string) {
		checkApply(t, update, doc, matched)
	})
}

var (
	fuzzPaths = []string{"a", "b", "_id", "a.b", "a.0", "a.1.b", "a.$", "a.$[]", "a.$[x]", "a.$[].b", "b.c.d", "a.b.c", "0", "a.10"}
	fuzzOps   = []string{"$set", "$unset", "$inc", "$mul", "$min", "$max", "$rename", "$setOnInsert", "$currentDate",
		"$push", "$addToSet", "$pop", "$pull", "$pullAll", "$bit"}
)

func randomArg(r *rand.Rand, op string) bsoncore.Value {
	switch op {
	case "$rename":
		return bsontest.String(fuzzPaths[r.IntN(len(fuzzPaths))])
	case "$currentDate":
		return bsontest.Doc("$type", bsontest.String([]string{"date", "timestamp"}[r.IntN(2)]))
	case "$push":
		if r.IntN(2) == 0 {
			return bsontest.Doc("$each", bsontest.Arr(bsontest.RandomValue(r, 1), bsontest.Int32(1)),
				"$slice", bsontest.Int32(int32(r.IntN(5)-2)), "$sort", bsontest.Int32(1), "$position", bsontest.Int32(int32(r.IntN(5)-2)))
		}
	case "$addToSet":
		if r.IntN(2) == 0 {
			return bsontest.Doc("$each", bsontest.Arr(bsontest.RandomValue(r, 1), bsontest.Int32(1)))
		}
	case "$pop":
		return bsontest.Int32(int32(r.IntN(2)*2 - 1))
	case "$pullAll":
		return bsontest.Arr(bsontest.Int32(1), bsontest.RandomValue(r, 1))
	case "$bit":
		return bsontest.Doc("xor", bsontest.Int32(int32(r.IntN(8))))
	case "$inc", "$mul":
		return bsontest.RandomNumber(r)
	}
	return bsontest.RandomValue(r, 2)
}

func randomUpdate(r *rand.Rand) bsoncore.Document {
	if r.IntN(8) == 0 {
		return bsontest.D("a", bsontest.RandomValue(r, 2), "_id", bsontest.Int32(int32(r.IntN(2))))
	}
	var kv []any
	for range 1 + r.IntN(3) {
		op := fuzzOps[r.IntN(len(fuzzOps))]
		var fields []any
		for range 1 + r.IntN(2) {
			fields = append(fields, fuzzPaths[r.IntN(len(fuzzPaths))], randomArg(r, op))
		}
		kv = append(kv, op, bsontest.D(fields...))
	}
	return bsontest.D(kv...)
}

func randomDoc(r *rand.Rand) bsoncore.Document {
	kv := []any{"_id", bsontest.Int32(int32(r.IntN(2)))}
	for range r.IntN(4) {
		k := []string{"a", "b", "c", "0"}[r.IntN(4)]
		var v bsoncore.Value
		switch r.IntN(3) {
		case 0:
			v = bsontest.Arr(bsontest.Int32(1), bsontest.Doc("b", bsontest.Int32(1)), bsontest.RandomValue(r, 2))
		case 1:
			v = bsontest.Doc("b", bsontest.RandomValue(r, 2), "c", bsontest.Doc("d", bsontest.Int32(1)))
		default:
			v = bsontest.RandomValue(r, 3)
		}
		kv = append(kv, k, v)
	}
	return bsontest.D(kv...)
}

// TestRandomUpdates is the always-on slice of the fuzz target: thousands of structured
// random updates against random documents.
func TestRandomUpdates(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	r := rand.New(rand.NewPCG(7, 11))
	for i := 0; i < n; i++ {
		checkApply(t, randomUpdate(r), randomDoc(r), []string{"", "0", "1", "5"}[r.IntN(4)])
	}
}
