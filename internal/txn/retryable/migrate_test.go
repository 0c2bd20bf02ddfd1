package retryable

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/repl/oplog"
	"humongo/internal/txn/lsc"
)

// newMember opens a data node with an oplog writer (what a shard's primary has).
func newMember(t *testing.T) *operation.DB {
	t.Helper()
	db, err := operation.OpenDB(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	w, err := oplog.Open(context.Background(), oplog.Config{Engine: db.Engine, Catalog: db.Catalog, Colls: db.Colls,
		MaxSizeBytes: 16 << 20, TempDir: db.TempDir})
	if err != nil {
		t.Fatal(err)
	}
	db.SetObserver(w)
	return db
}

func key(b byte) lsc.Key {
	k := lsc.Key{UID: lsc.NoUserUID}
	k.ID[0] = b
	return k
}

// donorEntry is a donor's statement entry as its oplog holds it.
func donorEntry(k lsc.Key, txn int64, stmt int32, op string, o, o2 bsoncore.Document, inc uint32) bsoncore.Document {
	ui := catalog.NewUUID()
	b := bsoncore.NewDocumentBuilder().AppendDocument("lsid", LsidDoc(k)).AppendInt64("txnNumber", txn).
		AppendString("op", op).AppendString("ns", "t.c").AppendBinary("ui", 4, ui[:]).AppendDocument("o", o)
	if o2 != nil {
		b.AppendDocument("o2", o2)
	}
	return b.AppendInt32("stmtId", stmt).AppendTimestamp("ts", 1000, inc).AppendInt64("t", 1).AppendInt64("v", 2).
		AppendDateTime("wall", 1).Build()
}

func doc(kv ...any) bsoncore.Document {
	b := bsoncore.NewDocumentBuilder()
	for i := 0; i < len(kv); i += 2 {
		b.AppendInt32(kv[i].(string), int32(kv[i+1].(int)))
	}
	return b.Build()
}

func term() int64 { return 1 }

// withElems returns d with the encoded elements appended.
func withElems(d bsoncore.Document, elems []byte) bsoncore.Document {
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = append(b, d[4:len(d)-1]...)
	b = append(b, elems...)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

// TestApplyMigratedEntries: a donor's statements written on a recipient are executed
// statements of their sessions there (the reply comes from the donor's entry and the
// linked image), duplicates and older txnNumbers are skipped, a dead-end sentinel makes
// unknown statements IncompleteTransactionHistory, and malformed sequences are refused.
func TestApplyMigratedEntries(t *testing.T) {
	ctx := context.Background()
	db := newMember(t)

	// A findAndModify (postImage) of session A: the forged image, then its entry marked
	// needsRetryImage, as a donor sends them.
	a := key(1)
	upd := donorEntry(a, 5, 0, "u", doc("$v", 2), doc("_id", 1), 10)
	image := bsoncore.NewDocumentBuilder().AppendDocument("lsid", LsidDoc(a)).AppendInt64("txnNumber", 5).
		AppendString("op", "n").AppendString("ns", "t.c").AppendDocument("o", doc("_id", 1, "v", 11)).
		AppendInt32("stmtId", 0).AppendTimestamp("ts", 0, 0).AppendInt64("t", -1).Build()
	marked := withElems(upd, bsoncore.AppendStringElement(nil, needsRetryImageField, "postImage"))

	var last MigratedResult
	var err error
	if last, err = ApplyMigrated(ctx, db, term, image, last); err != nil || !last.IsImage || last.OpTime.IsNull() {
		t.Fatalf("image: %+v %v", last, err)
	}
	if last, err = ApplyMigrated(ctx, db, term, marked, last); err != nil || last.IsImage {
		t.Fatalf("entry: %+v %v", last, err)
	}
	written := last.OpTime
	// The same entry again (a second migration's copy): nothing written.
	if again, err := ApplyMigrated(ctx, db, term, marked, last); err != nil || again.OpTime != written {
		t.Fatalf("duplicate: %+v %v", again, err)
	}

	tx, err := Begin(ctx, db, a, 5, term)
	if err != nil {
		t.Fatal(err)
	}
	if done, err := tx.Executed(0); !done || err != nil {
		t.Fatalf("migrated statement not executed: %v %v", done, err)
	}
	st := tx.Stmt(0, false)
	st.SetImageKind("postImage")
	e, err := st.Entry(ctx)
	if err != nil || string(e) != string(marked) {
		t.Fatalf("Entry is not the donor's entry: %v %v", bsoncore.Document(e), err)
	}
	img, err := st.Image(ctx, e)
	if err != nil || img.Lookup("v").Int32() != 11 {
		t.Fatalf("Image: %v %v", img, err)
	}
	st.SetImageKind("preImage")
	if _, err := st.Image(ctx, e); mongoerr.CodeOf(err) != mongoerr.Location40606 {
		t.Fatalf("a retry asking for the other image: %v", err)
	}
	// The recipient re-donating: its entry leads to the image entry it wrote.
	stored, err := ReadOplogEntry(ctx, db, written.TS)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := stored.Lookup("o").DocumentOK(); string(o) != string(sessionOplogTag) || !stored.Lookup("fromMigrate").Boolean() {
		t.Fatalf("written entry %v", stored)
	}
	if fwd, same, err := ImageForMigration(ctx, db, stored); err != nil || fwd == nil || string(same) != string(stored) ||
		fwd.Lookup("o", "v").Int32() != 11 {
		t.Fatalf("ImageForMigration of a migrated entry: %v %v", fwd, err)
	}
	tx.End()

	// An older txnNumber of the session is not written.
	old := donorEntry(a, 4, 0, "i", doc("_id", 2), nil, 20)
	if r, err := ApplyMigrated(ctx, db, term, old, last); err != nil || r.OpTime != last.OpTime {
		t.Fatalf("older txnNumber: %+v %v", r, err)
	}

	// A dead-end sentinel for session B: its statements are unknown.
	b := key(2)
	if _, err = ApplyMigrated(ctx, db, term, SentinelEntry(LsidDoc(b), 3, 1), MigratedResult{}); err != nil {
		t.Fatal(err)
	}
	tb, err := Begin(ctx, db, b, 3, term)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Executed(0); mongoerr.CodeOf(err) != mongoerr.IncompleteTransactionHistory {
		t.Fatalf("statement after a dead-end sentinel: %v", err)
	}
	tb.End()
	// ... also after the catalog forgets it (the chain is read back from the oplog).
	Sessions(db).Invalidate()
	tb, err = Begin(ctx, db, b, 3, func() int64 { return 2 })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Executed(1); mongoerr.CodeOf(err) != mongoerr.IncompleteTransactionHistory {
		t.Fatalf("statement after a reloaded dead-end sentinel: %v", err)
	}
	tb.End()

	// Malformed sequences.
	c := key(3)
	ins := donorEntry(c, 1, 0, "i", doc("_id", 3), nil, 30)
	els, _ := ins.Elements()
	nb := bsoncore.NewDocumentBuilder()
	for _, el := range els[1:] {
		nb.AppendValue(el.Key(), el.Value())
	}
	noLsid := nb.Build()
	if _, err := ApplyMigrated(ctx, db, term, noLsid, MigratedResult{}); mongoerr.CodeOf(err) != mongoerr.UnsupportedFormat {
		t.Fatalf("entry without lsid: %v", err)
	}
	imgC := bsoncore.NewDocumentBuilder().AppendDocument("lsid", LsidDoc(c)).AppendInt64("txnNumber", 1).
		AppendString("op", "n").AppendString("ns", "t.c").AppendDocument("o", doc("_id", 3)).AppendInt32("stmtId", 0).Build()
	lc, err := ApplyMigrated(ctx, db, term, imgC, MigratedResult{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ApplyMigrated(ctx, db, term, imgC, lc); mongoerr.CodeOf(err) != mongoerr.Location40632 {
		t.Fatalf("two images in a row: %v", err)
	}
	if _, err := ApplyMigrated(ctx, db, term, donorEntry(key(4), 1, 0, "u", doc("$v", 2), doc("_id", 3), 31), lc); mongoerr.CodeOf(err) != mongoerr.Location40629 {
		t.Fatalf("image of another session: %v", err)
	}
	if _, err := ApplyMigrated(ctx, db, term, ins, lc); mongoerr.CodeOf(err) != mongoerr.Location40631 {
		t.Fatalf("image followed by an entry that links none: %v", err)
	}
	if _, err := ApplyMigrated(ctx, db, term, stored, MigratedResult{}); err != nil {
		t.Fatalf("an executed statement is skipped before its links are checked: %v", err)
	}
	linked := donorEntry(key(5), 1, 0, "u", doc("$v", 2), doc("_id", 5), 40)
	linked = withElems(linked, written.AppendElement(nil, preImageOpTimeField))
	if _, err := ApplyMigrated(ctx, db, term, linked, MigratedResult{}); mongoerr.CodeOf(err) != mongoerr.Location40628 {
		t.Fatalf("image link without its image: %v", err)
	}
}

// TestOriginal: a migrated entry's original is its o2; other entries are themselves.
func TestOriginal(t *testing.T) {
	k := key(9)
	ins := donorEntry(k, 1, 0, "i", doc("_id", 1), nil, 1)
	wrapped := bsoncore.NewDocumentBuilder().AppendString("op", "n").AppendDocument("o", sessionOplogTag).
		AppendDocument("o2", ins).Build()
	if got := Original(wrapped); string(got) != string(ins) {
		t.Fatalf("Original(migrated) = %v", got)
	}
	if got := Original(ins); string(got) != string(ins) {
		t.Fatal("Original of a plain entry must be the entry")
	}
	note := bsoncore.NewDocumentBuilder().AppendString("op", "n").AppendDocument("o", doc("msg", 1)).AppendDocument("o2", ins).Build()
	if got := Original(note); string(got) != string(note) {
		t.Fatal("an untagged no-op is not a migrated entry")
	}
	s := SentinelEntry(LsidDoc(k), 4, 1)
	if !IsSentinel(s) || IsSentinel(ins) {
		t.Fatal("IsSentinel")
	}
	if o2, _ := s.Lookup("o2").DocumentOK(); string(o2) != string(deadEndSentinel) {
		t.Fatalf("sentinel o2 %v", o2)
	}
}
