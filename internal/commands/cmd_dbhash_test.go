package commands_test

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/mongoerr"
)

// dbHashReply is the part of dbHash's reply the tests read.
type dbHashReply struct {
	Host        string                 `bson:"host"`
	Collections map[string]string      `bson:"collections"`
	Capped      []string               `bson:"capped"`
	UUIDs       map[string]bson.Binary `bson:"uuids"`
	MD5         string                 `bson:"md5"`
	TimeMillis  int64                  `bson:"timeMillis"`
	FromCache   []string               `bson:"fromCache"`
}

func dbHashOf(t *testing.T, e *ddlEnv, db string, cmd bson.D) dbHashReply {
	t.Helper()
	raw := e.must(db, cmd)
	var r dbHashReply
	if err := bson.Unmarshal(raw, &r); err != nil {
		t.Fatalf("decode %v: %v", raw, err)
	}
	if r.Collections == nil || r.UUIDs == nil || r.Capped == nil || r.FromCache == nil || r.MD5 == "" {
		t.Fatalf("dbHash reply lacks fields: %v", raw)
	}
	return r
}

// md5Hex is the hex md5 of the concatenation of parts.
func md5Hex(parts ...[]byte) string {
	h := md5.New()
	for _, p := range parts {
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestDBHashShape pins the reply against hashes computed independently in the test: a
// collection's hash is the md5 of its documents' BSON in _id order whatever the insertion
// order, and md5 is the md5 of the collection hashes in name order.
func TestDBHashShape(t *testing.T) {
	e := ddlStart(t, t.TempDir())
	rng := rand.New(rand.NewPCG(1, 2))

	// Documents whose _ids sort differently as BSON than by insertion, including mixed types
	// (numbers sort before strings) and numeric _ids compared by value.
	sorted := []bson.D{
		{{Key: "_id", Value: int32(-5)}, {Key: "x", Value: "a"}},
		{{Key: "_id", Value: 1.5}, {Key: "x", Value: bson.A{1, 2}}},
		{{Key: "_id", Value: int64(2)}, {Key: "x", Value: bson.D{{Key: "y", Value: true}}}},
		{{Key: "_id", Value: int32(10)}},
		{{Key: "_id", Value: "a"}, {Key: "x", Value: nil}},
		{{Key: "_id", Value: "b"}, {Key: "x", Value: 3}},
	}
	var want [][]byte
	for _, d := range sorted {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, b)
	}
	for _, name := range []string{"b", "a"} {
		shuffled := append([]bson.D(nil), sorted...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		e.insert("h."+name, shuffled...)
	}
	e.insert("h.other", bson.D{{Key: "_id", Value: 1}})
	e.must("h", bson.D{{Key: "create", Value: "empty"}})
	e.must("h", bson.D{{Key: "create", Value: "capped"}, {Key: "capped", Value: true}, {Key: "size", Value: 4096}})
	e.insert("h2.unrelated", bson.D{{Key: "_id", Value: 1}})

	r := dbHashOf(t, e, "h", bson.D{{Key: "dbHash", Value: 1}})
	collHash := md5Hex(want...)
	empty := md5Hex()
	otherDoc, _ := bson.Marshal(bson.D{{Key: "_id", Value: 1}})
	wantColls := map[string]string{"a": collHash, "b": collHash, "capped": empty, "empty": empty, "other": md5Hex(otherDoc)}
	if len(r.Collections) != len(wantColls) {
		t.Fatalf("collections %v, want %v", r.Collections, wantColls)
	}
	for name, h := range wantColls {
		if r.Collections[name] != h {
			t.Errorf("collection %s: hash %s, want %s", name, r.Collections[name], h)
		}
	}
	// md5 over the collection hashes in name order.
	if w := md5Hex([]byte(collHash), []byte(collHash), []byte(empty), []byte(empty), []byte(md5Hex(otherDoc))); r.MD5 != w {
		t.Errorf("md5 %s, want %s", r.MD5, w)
	}
	if len(r.Capped) != 1 || r.Capped[0] != "capped" {
		t.Errorf("capped %v, want [capped]", r.Capped)
	}
	if len(r.FromCache) != 0 || r.Host == "" {
		t.Errorf("fromCache %v host %q", r.FromCache, r.Host)
	}
	// uuids are the collections' UUIDs as listCollections reports them.
	lc := e.must("h", bson.D{{Key: "listCollections", Value: 1}})
	for _, c := range ddlBatch(t, lc) {
		name := c.Lookup("name").StringValue()
		sub, data := c.Lookup("info", "uuid").Binary()
		u, ok := r.UUIDs[name]
		if !ok || u.Subtype != 4 || sub != 4 || !bytes.Equal(u.Data, data) {
			t.Errorf("uuid of %s: dbHash %v, listCollections %x", name, u, data)
		}
	}
	if len(r.UUIDs) != len(wantColls) {
		t.Errorf("uuids %v", r.UUIDs)
	}

	// The lower-case alias answers the same; a filter restricts the collections (unknown
	// names are ignored) and md5 covers only them.
	if r2 := dbHashOf(t, e, "h", bson.D{{Key: "dbhash", Value: 1}}); r2.MD5 != r.MD5 {
		t.Errorf("dbhash alias md5 %s, dbHash %s", r2.MD5, r.MD5)
	}
	f := dbHashOf(t, e, "h", bson.D{{Key: "dbHash", Value: 1}, {Key: "collections", Value: bson.A{"other", "a", "missing"}}})
	if len(f.Collections) != 2 || f.Collections["a"] != collHash || len(f.UUIDs) != 2 || len(f.Capped) != 0 {
		t.Errorf("filtered reply %+v", f)
	}
	if w := md5Hex([]byte(collHash), []byte(md5Hex(otherDoc))); f.MD5 != w {
		t.Errorf("filtered md5 %s, want %s", f.MD5, w)
	}

	// A change to one document changes that collection's hash and md5, and nothing else.
	e.must("h", bson.D{{Key: "update", Value: "b"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "b"}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 4}}}}}}}}})
	r3 := dbHashOf(t, e, "h", bson.D{{Key: "dbHash", Value: 1}})
	if r3.Collections["b"] == collHash || r3.Collections["a"] != collHash || r3.MD5 == r.MD5 {
		t.Errorf("after an update: b %s a %s md5 %s (before %s)", r3.Collections["b"], r3.Collections["a"], r3.MD5, r.MD5)
	}

	// A database without collections hashes to the md5 of nothing; `local` is never hashed.
	if r := dbHashOf(t, e, "nothing", bson.D{{Key: "dbHash", Value: 1}}); len(r.Collections) != 0 || r.MD5 != empty {
		t.Errorf("empty database: %+v", r)
	}
	e.insert("local.x", bson.D{{Key: "_id", Value: 1}})
	if r := dbHashOf(t, e, "local", bson.D{{Key: "dbHash", Value: 1}}); len(r.Collections) != 0 {
		t.Errorf("local is not replicated, dbHash hashed %v", r.Collections)
	}
}

// TestDBHashClustered: a clustered collection is hashed in _id order too, not in the order its
// records were inserted.
func TestDBHashClustered(t *testing.T) {
	e := ddlStart(t, t.TempDir())
	if _, err := e.run("c", bson.D{{Key: "create", Value: "cl"},
		{Key: "clusteredIndex", Value: bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "unique", Value: true}}}}); err != nil {
		t.Skipf("clustered collections unavailable: %v", err)
	}
	docs := []bson.D{{{Key: "_id", Value: 3}}, {{Key: "_id", Value: 1}, {Key: "v", Value: "x"}}, {{Key: "_id", Value: 2}}}
	e.insert("c.cl", docs...)
	var want [][]byte
	for _, i := range []int{1, 2, 0} {
		b, _ := bson.Marshal(docs[i])
		want = append(want, b)
	}
	r := dbHashOf(t, e, "c", bson.D{{Key: "dbHash", Value: 1}})
	if r.Collections["cl"] != md5Hex(want...) {
		t.Errorf("clustered hash %s, want %s", r.Collections["cl"], md5Hex(want...))
	}
}

func TestDBHashBadInput(t *testing.T) {
	e := ddlStart(t, t.TempDir())
	e.insert("bad.c", bson.D{{Key: "_id", Value: 1}})
	for _, tc := range []struct {
		name string
		cmd  bson.D
		code mongoerr.Code
	}{
		{"collections not an array", bson.D{{Key: "dbHash", Value: 1}, {Key: "collections", Value: "c"}}, mongoerr.TypeMismatch},
		{"collections an object", bson.D{{Key: "dbHash", Value: 1}, {Key: "collections", Value: bson.D{{Key: "0", Value: "c"}}}}, mongoerr.TypeMismatch},
		{"non-string entry", bson.D{{Key: "dbHash", Value: 1}, {Key: "collections", Value: bson.A{"c", 1}}}, mongoerr.BadValue},
		{"null entry", bson.D{{Key: "dbHash", Value: 1}, {Key: "collections", Value: bson.A{nil}}}, mongoerr.BadValue},
	} {
		t.Run(tc.name, func(t *testing.T) { e.fail("bad", tc.cmd, tc.code) })
	}
	// An empty filter filters nothing, as in mongod.
	if r := dbHashOf(t, e, "bad", bson.D{{Key: "dbHash", Value: 1}, {Key: "collections", Value: bson.A{}}}); len(r.Collections) != 1 {
		t.Errorf("empty filter: %v", r.Collections)
	}
}
