package oplog_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/opobserver"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

// preImages returns a node's config.system.preimages documents as extended JSON, sorted.
func (n *node) preImages() []string {
	n.t.Helper()
	return n.docsAt(oplog.PreImagesNS, 0)
}

// preImageKey is a pre-image's place: the collection, the entry and the index in it.
type preImageKey struct {
	uuid  catalog.UUID
	ts    optime.Timestamp
	index int64
}

func keyOf(t *testing.T, d bson.Raw) preImageKey {
	t.Helper()
	id := d.Lookup("_id").Document()
	_, b := id.Lookup("nsUUID").Binary()
	var k preImageKey
	copy(k.uuid[:], b)
	s, i := id.Lookup("ts").Timestamp()
	k.ts = optime.MakeTimestamp(s, i)
	k.index = id.Lookup("applyOpsIndex").Int64()
	return k
}

// wantPreImages derives, from a node's oplog, the pre-image every update and delete of a
// collection in enabled must have recorded: the document with the operation's _id as the
// node had it just before the entry's timestamp, with the entry's wall clock.
func (n *node) wantPreImages(enabled map[catalog.UUID]string) map[preImageKey]string {
	n.t.Helper()
	want := map[preImageKey]string{}
	add := func(op bson.Raw, ts optime.Timestamp, index int64, wall bson.DateTime) {
		kind := op.Lookup("op").StringValue()
		if kind != "u" && kind != "d" {
			return
		}
		_, b := op.Lookup("ui").Binary()
		var u catalog.UUID
		copy(u[:], b)
		ns, ok := enabled[u]
		if !ok {
			return
		}
		idv := op.Lookup("o", "_id")
		if kind == "u" {
			idv = op.Lookup("o2", "_id")
		}
		var pre string
		for _, d := range n.docsAt(ns, ts-1) {
			var raw bson.Raw
			if err := bson.UnmarshalExtJSON([]byte(d), true, &raw); err != nil {
				n.t.Fatal(err)
			}
			if raw.Lookup("_id").Equal(idv) {
				pre = raw.String()
			}
		}
		if pre == "" {
			n.t.Fatalf("no document %v in %s before %v", idv, ns, ts)
		}
		want[preImageKey{u, ts, index}] = fmt.Sprintf("%d %s", int64(wall), pre)
	}
	for _, e := range n.oplogEntries() {
		ts := entryTS(n.t, e)
		wall := e.Lookup("wall").DateTime()
		if ops, ok := e.Lookup("o", "applyOps").ArrayOK(); ok {
			vals, _ := ops.Values()
			for i, v := range vals {
				add(v.Document(), ts, int64(i), bson.DateTime(wall))
			}
			continue
		}
		add(e, ts, 0, bson.DateTime(wall))
	}
	return want
}

// gotPreImages reads a node's pre-images in the form of wantPreImages.
func (n *node) gotPreImages() map[preImageKey]string {
	n.t.Helper()
	got := map[preImageKey]string{}
	for _, s := range n.preImages() {
		var d bson.Raw
		if err := bson.UnmarshalExtJSON([]byte(s), true, &d); err != nil {
			n.t.Fatal(err)
		}
		got[keyOf(n.t, d)] = fmt.Sprintf("%d %s", int64(d.Lookup("operationTime").DateTime()), d.Lookup("preImage").Document().String())
	}
	return got
}

// txn runs f as a multi-document transaction on n: its writes are collected, then logged as
// applyOps at commit in the same unit.
func (n *node) txn(ns string, number int64, f func(ru *storage.RecoveryUnit, c *index.Collection) error) {
	n.t.Helper()
	lsid := mustDoc(n.t, bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: bytes.Repeat([]byte{7}, 16)}}})
	n.write(ns, func(ru *storage.RecoveryUnit, c *index.Collection) error {
		tc := &opobserver.TxnCollector{}
		release := opobserver.WithTransaction(ru, tc)
		defer release()
		if err := f(ru, c); err != nil {
			return err
		}
		_, _, err := n.w.LogTransaction(ru, lsid, number, tc.Ops)
		return err
	})
}

// update replaces the document with _id id by f(doc).
func update(ru *storage.RecoveryUnit, c *index.Collection, id int32, f func(bson.D) bson.D) error {
	rid, cur, found, err := c.FindByID(ru, bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, id)})
	if err != nil || !found {
		return fmt.Errorf("find %d: found %v, %v", id, found, err)
	}
	var d bson.D
	if err := bson.Unmarshal(cur, &d); err != nil {
		return err
	}
	next, err := bson.Marshal(f(d))
	if err != nil {
		return err
	}
	return c.UpdateDocument(ru, rid, slices.Clone(cur), next)
}

func remove(ru *storage.RecoveryUnit, c *index.Collection, id int32) error {
	rid, cur, found, err := c.FindByID(ru, bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, id)})
	if err != nil || !found {
		return fmt.Errorf("find %d: found %v, %v", id, found, err)
	}
	return c.DeleteDocument(ru, rid, slices.Clone(cur))
}

func set(k string, v any) func(bson.D) bson.D {
	return func(d bson.D) bson.D {
		for i := range d {
			if d[i].Key == k {
				d[i].Value = v
				return d
			}
		}
		return append(d, bson.E{Key: k, Value: v})
	}
}

// TestPreImagesRecordedAndApplied: a primary records a pre-image for every update, replace,
// delete and findAndModify of a collection with changeStreamPreAndPostImages (none for one
// without, none after the option is disabled), at the entry's timestamp with its wall clock,
// and per applyOps entry and index inside transactions, chains included; a second node
// applying the oplog records exactly the same ones, and applying twice changes nothing.
func TestPreImagesRecordedAndApplied(t *testing.T) {
	a := openNode(t, true)
	cl := a.serve()
	run(t, cl, "test", bson.D{{Key: "create", Value: "p"}, {Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}})
	run(t, cl, "test", bson.D{{Key: "create", Value: "q"}})
	for _, c := range []string{"p", "q"} {
		run(t, cl, "test", bson.D{{Key: "insert", Value: c}, {Key: "documents", Value: bson.A{
			bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 2}},
			bson.D{{Key: "_id", Value: 3}, {Key: "x", Value: 3}}, bson.D{{Key: "_id", Value: 4}, {Key: "x", Value: 4}},
			bson.D{{Key: "_id", Value: 5}, {Key: "x", Value: 5}}, bson.D{{Key: "_id", Value: 6}, {Key: "x", Value: 6}},
		}}})
		run(t, cl, "test", bson.D{{Key: "update", Value: c}, {Key: "updates", Value: bson.A{
			bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 10}}}}}},
			bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 2}}}, {Key: "u", Value: bson.D{{Key: "y", Value: "replaced"}}}},
		}}})
		run(t, cl, "test", bson.D{{Key: "delete", Value: c}, {Key: "deletes", Value: bson.A{
			bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 3}}}, {Key: "limit", Value: 1}}}}})
		run(t, cl, "test", bson.D{{Key: "findAndModify", Value: c}, {Key: "query", Value: bson.D{{Key: "_id", Value: 4}}},
			{Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "z", Value: true}}}}}})
		run(t, cl, "test", bson.D{{Key: "findAndModify", Value: c}, {Key: "query", Value: bson.D{{Key: "_id", Value: 4}}},
			{Key: "remove", Value: true}})
		// A transaction: an insert (index 0), an update (1) and a delete (2) in one entry.
		a.txn("test."+c, 1, func(ru *storage.RecoveryUnit, coll *index.Collection) error {
			if _, err := coll.InsertDocuments(ru, []bsoncore.Document{mustDoc(t, bson.D{{Key: "_id", Value: 7}})}); err != nil {
				return err
			}
			if err := update(ru, coll, 1, set("t", 1)); err != nil {
				return err
			}
			return remove(ru, coll, 2)
		})
	}
	// A transaction chain: one operation per applyOps entry, so every pre-image is at index
	// 0 of its own entry, and the insert's entry has none.
	restore := oplog.SetMaxApplyOpsBytes(10)
	a.txn("test.p", 2, func(ru *storage.RecoveryUnit, coll *index.Collection) error {
		if _, err := coll.InsertDocuments(ru, []bsoncore.Document{mustDoc(t, bson.D{{Key: "_id", Value: 8}})}); err != nil {
			return err
		}
		if err := update(ru, coll, 5, set("chain", 1)); err != nil {
			return err
		}
		if err := update(ru, coll, 1, set("chain", 2)); err != nil {
			return err
		}
		return remove(ru, coll, 6)
	})
	restore()
	// Disabled again: later writes record nothing.
	run(t, cl, "test", bson.D{{Key: "collMod", Value: "p"}, {Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: false}}}})
	run(t, cl, "test", bson.D{{Key: "delete", Value: "p"}, {Key: "deletes", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 5}}}, {Key: "limit", Value: 1}}}}})

	pm, _ := a.db.Catalog.Latest().ByNS("test.p")
	qm, _ := a.db.Catalog.Latest().ByNS("test.q")
	if pm.PreAndPostImages || qm.PreAndPostImages {
		t.Fatalf("option still enabled: p %v, q %v", pm.PreAndPostImages, qm.PreAndPostImages)
	}
	// The final delete of test.p is after the option was disabled: expected pre-images come
	// from the oplog up to the collMod.
	var upTo optime.Timestamp
	for _, e := range a.oplogEntries() {
		if e.Lookup("o", "collMod").Type != 0 {
			upTo = entryTS(t, e)
		}
	}
	want := a.wantPreImages(map[catalog.UUID]string{pm.UUID: "test.p"})
	for k := range want {
		if k.ts > upTo {
			delete(want, k)
		}
	}
	got := a.gotPreImages()
	// 2 updates, 1 delete, 2 findAndModify, txn update and delete, chain's 2 updates and a
	// delete.
	if len(want) != 10 {
		t.Errorf("%d pre-images expected from the oplog, want 10: %v", len(want), want)
	}
	if !mapsEqual(got, want) {
		t.Fatalf("pre-images on the primary:\n got %v\nwant %v", got, want)
	}
	chain := 0 // pre-images at index 0
	for k := range got {
		if k.uuid == qm.UUID {
			t.Errorf("pre-image recorded for test.q: %v", k)
		}
		if k.index > 2 {
			t.Errorf("applyOpsIndex %d out of range", k.index)
		}
		if k.index == 0 {
			chain++
		}
	}
	// Outside transactions 5, and the chain's 3, each alone in its entry.
	if chain != 8 {
		t.Errorf("%d pre-images at applyOpsIndex 0, want 8", chain)
	}

	// A second member applying the oplog (twice per entry) records the same pre-images.
	b := openNode(t, true)
	entries := a.oplogEntries()
	for _, e := range entries {
		b.appendOplog(bsoncore.Document(e))
	}
	ap := oplog.NewApplier(oplog.Config{Engine: b.db.Engine, Catalog: b.db.Catalog, Colls: b.db.Colls, TempDir: b.db.TempDir})
	ru := b.db.Engine.NewRecoveryUnit()
	defer ru.Close()
	for i, e := range entries {
		for rep := range 2 {
			if err := ap.Apply(context.Background(), ru, bsoncore.Document(e), oplog.ModeSecondary); err != nil {
				t.Fatalf("apply entry %d (%s) time %d: %v", i, e, rep+1, err)
			}
		}
	}
	if bg := b.gotPreImages(); !mapsEqual(bg, got) {
		t.Fatalf("pre-images on the secondary:\n got %v\nwant %v", bg, got)
	}
}

func mapsEqual(a, b map[preImageKey]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestPreImagesOfAppliedPreparedTransaction: a secondary applying a prepare entry records
// its operations' pre-images (at the prepare entry's timestamp and their index in it) in the
// prepared unit, so they appear at the commit timestamp the commitTransaction entry gives.
func TestPreImagesOfAppliedPreparedTransaction(t *testing.T) {
	n := openNode(t, true)
	run(t, n.serve(), "test", bson.D{{Key: "create", Value: "p"}, {Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}})
	n.insert("test.p", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
	n.write(oplog.TransactionsNS, func(*storage.RecoveryUnit, *index.Collection) error { return nil })
	es := n.oplogEntries()
	prep := entryTS(t, es[len(es)-1]) + 10
	ls := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: bytes.Repeat([]byte{9}, 16)}}}
	prepare := txnEntry(t, ls, 1, prep, 0, applyOpsO([]bson.D{ins("test.p", 5), upd("test.p", 1, "a", 2)}, bson.E{Key: "prepare", Value: true}))
	commitTS := prep + 1
	commit := txnEntry(t, ls, 1, prep+2, prep, bson.D{{Key: "commitTransaction", Value: 1},
		{Key: "commitTimestamp", Value: bson.Timestamp{T: commitTS.Secs(), I: commitTS.Inc()}}})
	ap := oplog.NewApplier(oplog.Config{Engine: n.db.Engine, Catalog: n.db.Catalog, Colls: n.db.Colls, TempDir: n.db.TempDir})
	ru := n.db.Engine.NewRecoveryUnit()
	defer ru.Close()
	for _, e := range []bsoncore.Document{prepare, commit} {
		n.appendOplog(e)
		if err := ap.Apply(context.Background(), ru, e, oplog.ModeSecondary); err != nil {
			t.Fatalf("apply %s: %v", bson.Raw(e), err)
		}
	}
	pm, _ := n.db.Catalog.Latest().ByNS("test.p")
	var found []string
	for _, s := range n.docsAt(oplog.PreImagesNS, commitTS) {
		var d bson.Raw
		if err := bson.UnmarshalExtJSON([]byte(s), true, &d); err != nil {
			t.Fatal(err)
		}
		k := keyOf(t, d)
		if k.uuid != pm.UUID || k.ts != prep || k.index != 1 {
			t.Errorf("pre-image at %+v, want test.p's at the prepare entry, index 1", k)
		}
		found = append(found, d.Lookup("preImage").Document().String())
	}
	if want := `{"_id": {"$numberInt":"1"},"a": {"$numberInt":"1"}}`; len(found) != 1 || found[0] != want {
		t.Fatalf("pre-images at the commit: %v, want [%s]", found, want)
	}
	if got := n.docsAt(oplog.PreImagesNS, prep); len(got) != 0 {
		t.Errorf("pre-images visible below the commit timestamp: %v", got)
	}
}
