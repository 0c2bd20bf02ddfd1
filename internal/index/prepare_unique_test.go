package index

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// setPrepareUnique rewrites the spec of index name as collMod does.
func (v *env) setPrepareUnique(name string, on bool) {
	v.t.Helper()
	meta, _ := v.cat.Latest().ByNS(v.ns)
	im, ok := meta.Index(name)
	if !ok {
		v.t.Fatalf("no index %s", name)
	}
	els, err := im.Spec.Elements()
	if err != nil {
		v.t.Fatal(err)
	}
	idx, spec := bsoncore.AppendDocumentStart(nil)
	for _, el := range els {
		if el.Key() != "prepareUnique" {
			spec = append(spec, el...)
		}
	}
	if on {
		spec = bsoncore.AppendBooleanElement(spec, "prepareUnique", true)
	}
	spec, _ = bsoncore.AppendDocumentEnd(spec, idx)
	ru := v.e.NewRecoveryUnit()
	defer ru.Close()
	w := ru.BeginUnitOfWork()
	defer w.End()
	if err := v.cat.ReplaceIndexSpec(ru, v.ns, name, spec); err != nil {
		v.t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		v.t.Fatal(err)
	}
}

// TestPrepareUnique: with collMod's prepareUnique set on a non-unique index, inserts and
// updates that add a duplicate key fail with DuplicateKey, while the duplicates already in the
// index are tolerated (the index still validates with them, updates keeping the key pass).
func TestPrepareUnique(t *testing.T) {
	v := newEnv(t)
	if _, _, err := v.build(d{{"key", d{{"a", 1}}}, {"name", "a_1"}}, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	docs := []bsoncore.Document{
		doc(t, d{{"_id", 1}, {"a", 1}}),
		doc(t, d{{"_id", 2}, {"a", 1}}), // an existing duplicate
		doc(t, d{{"_id", 3}, {"a", 2}}),
	}
	rids, err := v.insert(docs...)
	if err != nil {
		t.Fatal(err)
	}
	v.setPrepareUnique("a_1", true)
	ix, _, err := v.coll.Index("a_1")
	if err != nil || ix == nil {
		t.Fatal(ix, err)
	}
	if !ix.PrepareUnique() || ix.Unique() {
		t.Fatalf("prepareUnique=%v unique=%v", ix.PrepareUnique(), ix.Unique())
	}
	wantDup := func(what string, err error) {
		t.Helper()
		if !mongoerr.Is(err, mongoerr.DuplicateKey) {
			t.Fatalf("%s: %v, want DuplicateKey", what, err)
		}
	}
	_, err = v.insert(doc(t, d{{"_id", 4}, {"a", 1}}))
	wantDup("insert of an already duplicated key", err)
	_, err = v.insert(doc(t, d{{"_id", 5}, {"a", 2}}))
	wantDup("insert of an existing key", err)
	_, err = v.insert(doc(t, d{{"_id", 6}, {"a", 7}}), doc(t, d{{"_id", 7}, {"a", 7}}))
	wantDup("two new equal keys in one vectored insert", err)
	if _, err := v.insert(doc(t, d{{"_id", 8}, {"a", 3}})); err != nil {
		t.Fatal(err)
	}
	update := func(rid recordid.ID, oldDoc, newDoc bsoncore.Document) error {
		return v.write(func(ru *storage.RecoveryUnit) error { return v.coll.UpdateDocument(ru, rid, oldDoc, newDoc) })
	}
	wantDup("update to an existing key", update(rids[2], docs[2], doc(t, d{{"_id", 3}, {"a", 1}})))
	// An update that keeps a duplicated key (the other fields change) is not a new key.
	if err := update(rids[0], docs[0], doc(t, d{{"_id", 1}, {"a", 1}, {"b", 1}})); err != nil {
		t.Fatalf("update keeping an existing duplicate: %v", err)
	}
	if err := update(rids[2], docs[2], doc(t, d{{"_id", 3}, {"a", 9}})); err != nil {
		t.Fatalf("update to a new key: %v", err)
	}
	if got := v.checkIndexExact("a_1"); got != 4 {
		t.Fatalf("index has %d keys, want 4", got)
	}
	// Cancelling prepareUnique accepts duplicates again.
	v.setPrepareUnique("a_1", false)
	if _, err := v.insert(doc(t, d{{"_id", 4}, {"a", 1}})); err != nil {
		t.Fatalf("insert after prepareUnique: false: %v", err)
	}
}
