package index

import (
	"context"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/storage"
)

func TestUniqueViolation(t *testing.T) {
	v := newEnv(t)
	if _, _, err := v.build(d{{"key", d{{"a", 1}, {"b", -1}}}, {"name", "a_1_b_-1"}, {"unique", true}}, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.insert(doc(t, d{{"_id", 1}, {"a", "x"}, {"b", int64(7)}})); err != nil {
		t.Fatal(err)
	}
	_, err := v.insert(doc(t, d{{"_id", 2}, {"a", "x"}, {"b", int64(7)}}))
	me, ok := mongoerr.As(err)
	if !ok || me.Code != mongoerr.DuplicateKey {
		t.Fatalf("want DuplicateKey, got %v", err)
	}
	want := `E11000 duplicate key error collection: test.c index: a_1_b_-1 dup key: { a: "x", b: 7 }`
	if me.Msg != want {
		t.Fatalf("message\n got %s\nwant %s", me.Msg, want)
	}
	info := me.Info.(bsoncore.Document)
	if got := info.Lookup("keyPattern").Document().String(); got != `{"a": {"$numberInt":"1"},"b": {"$numberInt":"-1"}}` {
		t.Fatalf("keyPattern %s", got)
	}
	if got := info.Lookup("keyValue").Document().String(); got != `{"a": "x","b": {"$numberLong":"7"}}` {
		t.Fatalf("keyValue %s", got)
	}
	// _id duplicates.
	_, err = v.insert(doc(t, d{{"_id", 1}, {"a", "y"}}))
	if me, ok := mongoerr.As(err); !ok || me.Msg != `E11000 duplicate key error collection: test.c index: _id_ dup key: { _id: 1 }` {
		t.Fatalf("_id dup: %v", err)
	}
	// The failed inserts left nothing behind (the unit rolled back).
	ix, _, _ := v.coll.Index("a_1_b_-1")
	if keys, _ := v.indexEntries(ix.ident); len(keys) != 1 {
		t.Fatalf("index has %d entries, want 1", len(keys))
	}
	// Missing fields are null: two documents without a and b collide.
	if _, err := v.insert(doc(t, d{{"_id", 3}})); err != nil {
		t.Fatal(err)
	}
	if _, err := v.insert(doc(t, d{{"_id", 4}})); !mongoerr.Is(err, mongoerr.DuplicateKey) ||
		!strings.Contains(err.Error(), "dup key: { a: null, b: null }") {
		t.Fatalf("null dup: %v", err)
	}
}

// TestConcurrentUniqueInsert races two units inserting the same key with different RecordIds:
// exactly one wins, the other sees WriteConflict (then DuplicateKey on retry).
func TestConcurrentUniqueInsert(t *testing.T) {
	v := newEnv(t)
	if _, _, err := v.build(d{{"key", d{{"u", 1}}}, {"name", "u_1"}, {"unique", true}}, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	ru1, ru2 := v.e.NewRecoveryUnit(), v.e.NewRecoveryUnit()
	defer ru1.Close()
	defer ru2.Close()
	w1, w2 := ru1.BeginUnitOfWork(), ru2.BeginUnitOfWork()
	if err := ru1.PreallocateSnapshot(); err != nil {
		t.Fatal(err)
	}
	if err := ru2.PreallocateSnapshot(); err != nil {
		t.Fatal(err)
	}
	if _, err := v.coll.InsertDocument(ru1, doc(t, d{{"_id", 1}, {"u", 5}})); err != nil {
		t.Fatal(err)
	}
	_, err := v.coll.InsertDocument(ru2, doc(t, d{{"_id", 2}, {"u", 5}}))
	if !storage.IsWriteConflict(err) {
		t.Fatalf("second insert: %v, want WriteConflict", err)
	}
	w2.End()
	if err := w1.Commit(); err != nil {
		t.Fatal(err)
	}
	w1.End()
	if _, err := v.insert(doc(t, d{{"_id", 2}, {"u", 5}})); !mongoerr.Is(err, mongoerr.DuplicateKey) {
		t.Fatalf("retry: %v, want DuplicateKey", err)
	}
	// Even when the first unit commits before the second writes (but after its snapshot).
	ru3, ru4 := v.e.NewRecoveryUnit(), v.e.NewRecoveryUnit()
	defer ru3.Close()
	defer ru4.Close()
	w4 := ru4.BeginUnitOfWork()
	if err := ru4.PreallocateSnapshot(); err != nil {
		t.Fatal(err)
	}
	w3 := ru3.BeginUnitOfWork()
	if _, err := v.coll.InsertDocument(ru3, doc(t, d{{"_id", 3}, {"u", 6}})); err != nil {
		t.Fatal(err)
	}
	if err := w3.Commit(); err != nil {
		t.Fatal(err)
	}
	w3.End()
	_, err = v.coll.InsertDocument(ru4, doc(t, d{{"_id", 4}, {"u", 6}}))
	if !storage.IsWriteConflict(err) && !mongoerr.Is(err, mongoerr.DuplicateKey) {
		t.Fatalf("stale-snapshot insert: %v, want WriteConflict", err)
	}
	w4.End()
}

func TestUpdateDeleteAndScan(t *testing.T) {
	v := newEnv(t)
	if _, _, err := v.build(d{{"key", d{{"a", 1}}}, {"name", "a_1"}}, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	var docs []bsoncore.Document
	for i := 0; i < 20; i++ {
		docs = append(docs, doc(t, d{{"_id", i}, {"a", i % 10}}))
	}
	rids, err := v.insert(docs...)
	if err != nil {
		t.Fatal(err)
	}
	ix, _, _ := v.coll.Index("a_1")
	// Update _id 3: a 3 → [30, 3] (keeps key 3, adds 30, becomes multikey).
	newDoc := doc(t, d{{"_id", 3}, {"a", a{30, 3}}})
	if err := v.write(func(ru *storage.RecoveryUnit) error {
		return v.coll.UpdateDocument(ru, rids[3], docs[3], newDoc)
	}); err != nil {
		t.Fatal(err)
	}
	if err := v.write(func(ru *storage.RecoveryUnit) error {
		return v.coll.DeleteDocument(ru, rids[4], docs[4])
	}); err != nil {
		t.Fatal(err)
	}
	keys, _ := v.indexEntries(ix.ident)
	exp := v.expectedEntries(ix)
	if len(keys) != len(exp) || len(keys) != 20 {
		t.Fatalf("index has %d keys, expected %d (20)", len(keys), len(exp))
	}
	for _, k := range keys {
		if _, ok := exp[k]; !ok {
			t.Fatalf("extra key %x", k)
		}
	}
	// Multikey was persisted: a catalog opened afresh on the same engine sees it.
	cat2, err := catalog.Open(context.Background(), v.e)
	if err != nil {
		t.Fatal(err)
	}
	defer cat2.Close()
	m, _ := cat2.Latest().ByNS(v.ns)
	im, _ := m.Index("a_1")
	if !im.Multikey || len(im.MultikeyPaths) != 1 || !im.MultikeyPaths[0][0] {
		t.Fatalf("multikey not durable: %+v", im)
	}

	// Range scan a in [2, 5): _id 2, 12, 3, 13, (4 deleted) 14.
	ru := v.e.NewRecoveryUnit()
	defer ru.Close()
	low := &Bound{Values: []bsoncore.Value{value(t, int32(2))}, Inclusive: true}
	high := &Bound{Values: []bsoncore.Value{value(t, 5.0)}, Inclusive: false}
	for _, rev := range []bool{false, true} {
		c, err := ix.NewCursor(ru, ScanOptions{Low: low, High: high, Reverse: rev})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for c.Next() {
			k, err := c.Key()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, k[0].String())
		}
		if c.Err() != nil {
			t.Fatal(c.Err())
		}
		c.Close()
		want := `{"$numberInt":"2"} {"$numberInt":"2"} {"$numberInt":"3"} {"$numberInt":"3"} {"$numberInt":"4"}`
		if rev {
			want = `{"$numberInt":"4"} {"$numberInt":"3"} {"$numberInt":"3"} {"$numberInt":"2"} {"$numberInt":"2"}`
		}
		if strings.Join(got, " ") != want {
			t.Fatalf("reverse=%v scan got %v", rev, got)
		}
	}
	// Exclusive low, inclusive high: (3, 4] → 4 only.
	c, _ := ix.NewCursor(ru, ScanOptions{Low: &Bound{Values: []bsoncore.Value{value(t, 3.0)}}, High: &Bound{Values: []bsoncore.Value{value(t, int64(4))}, Inclusive: true}})
	n := 0
	for c.Next() {
		n++
	}
	c.Close()
	if n != 1 {
		t.Fatalf("(3,4] returned %d", n)
	}
	// Point read by _id.
	rid, got, found, err := v.coll.FindByID(ru, value(t, int32(7)))
	if err != nil || !found || rid != rids[7] || bsoncore.Document(got).Lookup("a").Int32() != 7 {
		t.Fatalf("FindByID: %v %v %v", found, err, rid)
	}
	if _, _, found, _ := v.coll.FindByID(ru, value(t, int32(4))); found {
		t.Fatal("deleted document found")
	}
}

func TestDocumentTooLarge(t *testing.T) {
	v := newEnv(t)
	big := make([]byte, MaxDocumentSize)
	_, err := v.insert(doc(t, d{{"_id", 1}, {"b", bson.Binary{Data: big}}}))
	if !mongoerr.Is(err, mongoerr.BSONObjectTooLarge) {
		t.Fatalf("got %v", err)
	}
}

// TestCursorYield saves and restores an index cursor around changes to the index.
func TestCursorYield(t *testing.T) {
	v := newEnv(t)
	if _, _, err := v.build(d{{"key", d{{"a", 1}}}, {"name", "a_1"}}, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	var docs []bsoncore.Document
	for i := 0; i < 10; i++ {
		docs = append(docs, doc(t, d{{"_id", i}, {"a", i * 10}}))
	}
	rids, err := v.insert(docs...)
	if err != nil {
		t.Fatal(err)
	}
	ix, _, _ := v.coll.Index("a_1")
	ru := v.e.NewRecoveryUnit()
	defer ru.Close()
	c, err := ix.NewCursor(ru, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got []int32
	next := func() {
		if !c.Next() {
			t.Fatalf("scan ended early: %v", c.Err())
		}
		k, err := c.Key()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, k[0].Int32())
	}
	next() // 0
	next() // 10
	c.Save()
	ru.AbandonSnapshot()
	// Delete the current entry (10) and insert 15 between 10 and 20.
	if err := v.write(func(ru *storage.RecoveryUnit) error {
		return v.coll.DeleteDocument(ru, rids[1], docs[1])
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.insert(doc(t, d{{"_id", 100}, {"a", 15}})); err != nil {
		t.Fatal(err)
	}
	if err := c.Restore(); err != nil {
		t.Fatal(err)
	}
	next() // 15
	next() // 20
	c.Save()
	ru.AbandonSnapshot()
	if err := c.Restore(); err != nil {
		t.Fatal(err)
	}
	next() // 30 (20 still exists and is not repeated)
	want := []int32{0, 10, 15, 20, 30}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// TestPartialIndex: the write path compiles partialFilterExpression itself, so a partial index
// holds exactly the matching documents, from its build and from later writes.
func TestPartialIndex(t *testing.T) {
	v := newEnv(t)
	if _, err := v.insert(doc(t, d{{"_id", 1}, {"a", 1}}), doc(t, d{{"_id", 2}, {"a", 10}})); err != nil {
		t.Fatal(err)
	}
	spec := d{{"key", d{{"a", 1}}}, {"name", "a_1"}, {"partialFilterExpression", d{{"a", d{{"$gt", 5}}}}}}
	if _, _, err := v.build(spec, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.insert(doc(t, d{{"_id", 3}, {"a", 2}}), doc(t, d{{"_id", 4}, {"a", 20}})); err != nil {
		t.Fatal(err)
	}
	if n := v.checkIndexExact("a_1"); n != 2 {
		t.Fatalf("partial index has %d keys, want 2 (a: 10 and a: 20)", n)
	}
}
