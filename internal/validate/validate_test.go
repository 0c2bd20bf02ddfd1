package validate

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/keystring"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

const ns = "test.v"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type env struct {
	t    *testing.T
	e    *storage.Engine
	cat  *catalog.Catalog
	coll *index.Collection
	rids []recordid.ID
}

func D(kv ...any) bson.D {
	out := make(bson.D, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, bson.E{Key: kv[i].(string), Value: kv[i+1]})
	}
	return out
}

func marshal(t *testing.T, v any) bsoncore.Document {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newEnv creates test.v with several index kinds and ndocs documents, written through the
// index package's write path.
func newEnv(t *testing.T, ndocs int) *env {
	t.Helper()
	e, err := storage.Open(storage.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.OpenWithConfig(context.Background(), e, catalog.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close(); _ = e.Close() })
	v := &env{t: t, e: e, cat: cat}
	v.unit(func(ru *storage.RecoveryUnit) error {
		if _, err := cat.CreateCollection(ru, ns, nil); err != nil {
			return err
		}
		for _, spec := range []bson.D{
			D("key", D("a", 1), "name", "a_1"),
			D("key", D("u", 1), "name", "u_1", "unique", true),
			D("key", D("b.c", -1, "a", 1), "name", "bc_a"),
			D("key", D("h", "hashed"), "name", "h_hashed"),
			D("key", D("s", 1), "name", "s_1", "sparse", true),
			D("key", D("u", -1), "name", "u_partial", "partialFilterExpression", D("u", D("$gte", 150))),
		} {
			if _, err := cat.AddIndex(ru, ns, marshal(t, spec), true, nil); err != nil {
				return err
			}
		}
		return nil
	})
	v.coll, err = index.NewCollections(e, cat).Get(ns)
	if err != nil {
		t.Fatal(err)
	}
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	for i := 0; i < ndocs; i++ {
		d := D("_id", i, "a", i%7, "u", i, "b", D("c", fmt.Sprint("x", i%3)), "h", i*10)
		if i%5 == 0 {
			d = append(d, bson.E{Key: "s", Value: i})
		}
		if i%4 == 0 {
			d[1].Value = bson.A{i, i + 1, 1.5} // multikey on a
		}
		doc := marshal(t, d)
		var rid recordid.ID
		if err := v.coll.Write(context.Background(), ru, func() error {
			var err error
			rid, err = v.coll.InsertDocument(ru, doc)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		v.rids = append(v.rids, rid)
	}
	return v
}

func (v *env) unit(f func(ru *storage.RecoveryUnit) error) {
	v.t.Helper()
	ru := v.e.NewRecoveryUnit()
	defer ru.Close()
	w := ru.BeginUnitOfWork()
	defer w.End()
	if err := f(ru); err != nil {
		v.t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		v.t.Fatal(err)
	}
}

func (v *env) validate(full bool) *Result {
	v.t.Helper()
	r, err := ValidateWithOptions(context.Background(), v.e, v.cat, ns, Options{Full: full, Logger: quiet})
	if err != nil {
		v.t.Fatal(err)
	}
	return r
}

func (v *env) indexMeta(name string) *catalog.IndexMeta {
	m, _ := v.cat.Latest().ByNS(ns)
	ix, ok := m.Index(name)
	if !ok {
		v.t.Fatalf("no index %s", name)
	}
	return ix
}

func (v *env) collMeta() *catalog.CollectionMeta {
	m, _ := v.cat.Latest().ByNS(ns)
	return m
}

// firstKey returns the first raw entry of an index table.
func (v *env) firstKey(ident string) (key, val []byte) {
	ru := v.e.NewRecoveryUnit()
	defer ru.Close()
	c, err := ru.NewCursor(ident, storage.CursorOptions{})
	if err != nil {
		v.t.Fatal(err)
	}
	defer c.Close()
	if !c.First() {
		v.t.Fatal("empty index")
	}
	return append([]byte(nil), c.Key()...), append([]byte(nil), c.Value()...)
}

func TestValidCollection(t *testing.T) {
	v := newEnv(t, 200)
	r := v.validate(true)
	if !r.Valid || len(r.Errors) != 0 || len(r.Warnings) != 0 {
		t.Fatalf("valid collection reported invalid: %+v", r)
	}
	if r.NRecords != 200 || r.NIndexes != 7 || r.NInvalidDocuments != 0 {
		t.Fatalf("counters %+v", r)
	}
	// Every document has one _id, u, bc_a and h key; a has 3 keys for every 4th document
	// (the array [i, i+1, 1.5]) and 1 otherwise; s only every 5th (sparse); u_partial only
	// u >= 150 (partial).
	want := map[string]int64{"_id_": 200, "u_1": 200, "bc_a": 200 + 50*2, "h_hashed": 200, "s_1": 40, "a_1": 150 + 50*3,
		"u_partial": 50}
	for k, n := range want {
		if r.KeysPerIndex[k] != n {
			t.Errorf("keysPerIndex[%s] = %d, want %d", k, r.KeysPerIndex[k], n)
		}
		if !r.IndexDetails[k].Valid {
			t.Errorf("index %s invalid", k)
		}
	}
	out := r.ToBSON()
	for _, f := range []string{"ns", "uuid", "nInvalidDocuments", "nNonCompliantDocuments", "nrecords", "nIndexes",
		"keysPerIndex", "indexDetails", "valid", "repaired", "warnings", "errors", "extraIndexEntries",
		"missingIndexEntries", "corruptRecords"} {
		if _, err := out.LookupErr(f); err != nil {
			t.Errorf("reply lacks %s: %s", f, out)
		}
	}
	if ok, _ := out.Lookup("indexDetails", "a_1", "valid").BooleanOK(); !ok {
		t.Error("indexDetails.a_1.valid not true")
	}
}

func TestMissingIndexEntry(t *testing.T) {
	v := newEnv(t, 50)
	ix := v.indexMeta("a_1")
	key, _ := v.firstKey(ix.Ident)
	v.unit(func(ru *storage.RecoveryUnit) error { return ru.Delete(ix.Ident, key) })
	r := v.validate(false)
	if r.Valid || len(r.MissingIndexEntries) != 1 || len(r.ExtraIndexEntries) != 0 {
		t.Fatalf("want one missing entry: valid=%v missing=%v extra=%v errors=%v", r.Valid, r.MissingIndexEntries, r.ExtraIndexEntries, r.Errors)
	}
	m := r.MissingIndexEntries[0]
	rid, _, _ := keystring.DecodeRecordIDAtEnd(key)
	if m.IndexName != "a_1" || recordid.Compare(m.RecordID, rid) != 0 || m.IDKey == nil {
		t.Fatalf("missing entry %+v (want rid %v)", m, rid)
	}
	if r.IndexDetails["a_1"].Valid || !r.IndexDetails["_id_"].Valid {
		t.Fatal("indexDetails validity wrong")
	}
	if !contains(r.Errors, "Detected 1 missing index entries.") {
		t.Fatalf("errors %v", r.Errors)
	}
	if r.KeysPerIndex["a_1"] != 50-13+13*3-1 {
		t.Fatalf("keysPerIndex a_1 = %d", r.KeysPerIndex["a_1"])
	}
}

func TestExtraIndexEntry(t *testing.T) {
	v := newEnv(t, 50)
	ix := v.indexMeta("bc_a")
	vals := []bsoncore.Value{bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, "bogus")},
		bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 999)}}
	ks, tb := keystring.Encode(vals, keystring.MakeOrdering(ix.KeyPattern), recordid.Long(4242))
	v.unit(func(ru *storage.RecoveryUnit) error { return ru.Put(ix.Ident, ks, tb) })
	r := v.validate(false)
	if r.Valid || len(r.ExtraIndexEntries) != 1 || len(r.MissingIndexEntries) != 0 {
		t.Fatalf("want one extra entry: %+v", r)
	}
	x := r.ExtraIndexEntries[0]
	if x.RecordID.Int64() != 4242 || x.IndexKey.Lookup("b.c").StringValue() != "bogus" {
		t.Fatalf("extra entry %+v key %s", x, x.IndexKey)
	}
	if !contains(r.Errors, "Detected 1 extra index entries.") {
		t.Fatalf("errors %v", r.Errors)
	}
}

func TestIDIndexAndUniqueCorruption(t *testing.T) {
	v := newEnv(t, 30)
	id := v.indexMeta("_id_")
	key, _ := v.firstKey(id.Ident)
	v.unit(func(ru *storage.RecoveryUnit) error { return ru.Delete(id.Ident, key) })
	// A second entry for the first u value under another RecordId: a duplicate.
	u := v.indexMeta("u_1")
	ukey, utb := v.firstKey(u.Ident)
	_, plen, err := keystring.DecodeRecordIDAtEnd(ukey)
	if err != nil {
		t.Fatal(err)
	}
	dup := append(append([]byte(nil), ukey[:plen]...), recordidSuffix(t, u, 777)...)
	v.unit(func(ru *storage.RecoveryUnit) error { return ru.Put(u.Ident, dup, utb) })
	r := v.validate(false)
	if r.Valid {
		t.Fatal("corrupt collection reported valid")
	}
	if len(r.MissingIndexEntries) != 1 || r.MissingIndexEntries[0].IndexName != "_id_" {
		t.Fatalf("missing %+v", r.MissingIndexEntries)
	}
	if len(r.ExtraIndexEntries) != 1 || r.ExtraIndexEntries[0].IndexName != "u_1" || r.ExtraIndexEntries[0].RecordID.Int64() != 777 {
		t.Fatalf("extra %+v", r.ExtraIndexEntries)
	}
	found := false
	for _, e := range r.IndexDetails["u_1"].Errors {
		found = found || strings.Contains(e, "duplicate key")
	}
	if !found {
		t.Fatalf("no duplicate-key error: %v", r.IndexDetails["u_1"].Errors)
	}
}

// recordidSuffix returns the KeyString RecordId suffix for n.
func recordidSuffix(t *testing.T, ix *catalog.IndexMeta, n int64) []byte {
	t.Helper()
	with, _ := keystring.Encode(nil, keystring.MakeOrdering(ix.KeyPattern), recordid.Long(n))
	without, _ := keystring.Encode(nil, keystring.MakeOrdering(ix.KeyPattern), recordid.ID{})
	return with[len(without):]
}

func TestUnindexedArrayBreaksMultikey(t *testing.T) {
	v := newEnv(t, 0) // no document yet: no index is multikey
	if v.indexMeta("a_1").Multikey {
		t.Fatal("a_1 multikey on an empty collection")
	}
	rs, err := storage.OpenRecordStore(v.e, v.collMeta().Ident)
	if err != nil {
		t.Fatal(err)
	}
	// Write a record bypassing the index layer.
	v.unit(func(ru *storage.RecoveryUnit) error {
		_, err := rs.Insert(ru, marshal(t, D("_id", 1, "a", bson.A{1, 2})))
		return err
	})
	r := v.validate(false)
	if r.Valid || !contains(r.Errors, "Index with name: a_1 is not multi-key but has more than one key in document with RecordId(1)") {
		t.Fatalf("errors %v", r.Errors)
	}
	// Every index misses the document's keys: _id 1, a 2, u 1 (null), bc_a 2, h 1; the
	// sparse s_1 has none to miss.
	if len(r.MissingIndexEntries) != 7 {
		t.Fatalf("missing %d: %+v", len(r.MissingIndexEntries), r.MissingIndexEntries)
	}
}

func TestInvalidAndNonCompliantDocuments(t *testing.T) {
	v := newEnv(t, 5)
	rs, err := storage.OpenRecordStore(v.e, v.collMeta().Ident)
	if err != nil {
		t.Fatal(err)
	}
	// Duplicate field names: structurally valid BSON, not conformant.
	dupDoc := bsoncore.NewDocumentBuilder().AppendInt32("_id", 100).AppendInt32("x", 1).AppendInt32("x", 2).Build()
	var badRID recordid.ID
	v.unit(func(ru *storage.RecoveryUnit) error {
		var err error
		if badRID, err = rs.Insert(ru, []byte{12, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0}); err != nil { // truncated
			return err
		}
		return nil
	})
	r := v.validate(false)
	if r.Valid || r.NInvalidDocuments != 1 || len(r.CorruptRecords) != 1 || recordid.Compare(r.CorruptRecords[0], badRID) != 0 {
		t.Fatalf("invalid document not reported: %+v", r)
	}
	if !contains(r.Errors, "Detected one or more invalid documents. See logs.") {
		t.Fatalf("errors %v", r.Errors)
	}
	v.unit(func(ru *storage.RecoveryUnit) error { return rs.Delete(ru, badRID) })
	ru := v.e.NewRecoveryUnit()
	defer ru.Close()
	if err := v.coll.Write(context.Background(), ru, func() error {
		_, err := v.coll.InsertDocument(ru, dupDoc)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	r = v.validate(false)
	if !r.Valid || r.NNonCompliantDocuments != 0 {
		t.Fatalf("non-full validation: %+v", r)
	}
	r = v.validate(true)
	if !r.Valid || r.NNonCompliantDocuments != 1 || len(r.Warnings) != 1 {
		t.Fatalf("full validation: valid=%v nonCompliant=%d warnings=%v errors=%v", r.Valid, r.NNonCompliantDocuments, r.Warnings, r.Errors)
	}
}

func TestFastCountCorrection(t *testing.T) {
	v := newEnv(t, 20)
	ident := v.collMeta().Ident
	recs, size := v.e.Counts(ident)
	v.e.SetCounts(ident, recs+5, size+100)
	r := v.validate(false)
	if !r.Valid || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "fast count") {
		t.Fatalf("count mismatch not warned: %+v", r)
	}
	if got, _ := v.e.Counts(ident); got != recs+5 {
		t.Fatal("non-full validation changed the fast count")
	}
	r = v.validate(true)
	if !strings.HasSuffix(r.Warnings[0], "corrected") {
		t.Fatalf("warnings %v", r.Warnings)
	}
	if got, gotSize := v.e.Counts(ident); got != recs || gotSize != size {
		t.Fatalf("fast count not corrected: %d %d, want %d %d", got, gotSize, recs, size)
	}
	if r := v.validate(false); len(r.Warnings) != 0 {
		t.Fatalf("still warning after correction: %v", r.Warnings)
	}
}

func TestNamespaceNotFound(t *testing.T) {
	v := newEnv(t, 0)
	if _, err := Validate(context.Background(), v.e, v.cat, "test.nope", false); err == nil ||
		!strings.Contains(err.Error(), "does not exist to validate") {
		t.Fatalf("err %v", err)
	}
}

func TestCheckBSONDepth(t *testing.T) {
	d := bsoncore.NewDocumentBuilder().AppendInt32("x", 1).Build()
	for i := 0; i < MaxNestingDepth+1; i++ {
		d = bsoncore.NewDocumentBuilder().AppendDocument("d", d).Build()
	}
	if st, _ := checkBSON(d, false); st != invalidBSON {
		t.Fatal("over-deep document accepted")
	}
	// Truncations never panic.
	for i := range d {
		checkBSON(d[:i], true)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
