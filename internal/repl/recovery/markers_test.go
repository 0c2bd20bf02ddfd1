package recovery_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/optime"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/recovery"
)

// TestInitialSyncFlagSkipsRecovery: a member whose initial-sync flag is set holds a partial
// copy; startup recovery leaves it alone (no truncation, no recovery to stable, no replay)
// and reports the flag, so the member redoes initial sync (spec "Startup Recovery").
func TestInitialSyncFlagSkipsRecovery(t *testing.T) {
	h := writeHistory(t)
	db := reopen(t, h, h.mid)
	ctx := context.Background()
	if err := recovery.SetInitialSyncFlag(ctx, db.Engine, db.Catalog, db.Colls); err != nil {
		t.Fatal(err)
	}
	if err := applier.SetOplogTruncateAfterPoint(ctx, db.Engine, db.Catalog, db.Colls, h.late); err != nil {
		t.Fatal(err)
	}
	res := recoverDB(t, db)
	if !res.Skipped || !res.InitialSyncFlag || res.Replayed != 0 || !res.TruncatedAfter.IsNull() {
		t.Fatalf("recovery with the initial sync flag set: %+v", res)
	}
	if docs, _ := dump(t, db, "app.a", 0); docs[`"ghost"`] == "" {
		t.Fatal("recovery rolled the data back although the initial sync flag is set")
	}
	if top := topTS(t, db); top != h.top {
		t.Fatalf("oplog truncated to %v (top was %v) although the initial sync flag is set", top, h.top)
	}
}

// TestMarkers: minValid and the initial-sync flag share one document and neither write loses
// the other; clearing the flag records the initial sync's end as minValid.
func TestMarkers(t *testing.T) {
	h := writeHistory(t)
	db := reopen(t, h, h.top)
	ctx := context.Background()
	load := func() recovery.Markers {
		t.Helper()
		m, err := recovery.LoadMarkers(db.Engine, db.Catalog, db.Colls)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := load(); m != (recovery.Markers{}) {
		t.Fatalf("fresh member: %+v", m)
	}
	mv := optime.OpTime{TS: h.late, Term: 1}
	if err := recovery.SetMinValid(ctx, db.Engine, db.Catalog, db.Colls, mv); err != nil {
		t.Fatal(err)
	}
	if err := recovery.SetInitialSyncFlag(ctx, db.Engine, db.Catalog, db.Colls); err != nil {
		t.Fatal(err)
	}
	if m := load(); m.MinValid != mv || !m.InitialSyncFlag {
		t.Fatalf("after setting the flag: %+v", m)
	}
	mv2 := optime.OpTime{TS: h.top, Term: 1}
	if err := recovery.SetMinValid(ctx, db.Engine, db.Catalog, db.Colls, mv2); err != nil {
		t.Fatal(err)
	}
	if m := load(); m.MinValid != mv2 || !m.InitialSyncFlag {
		t.Fatalf("SetMinValid lost the flag: %+v", m)
	}
	end := optime.OpTime{TS: h.top + 5, Term: 2}
	if err := recovery.ClearInitialSyncFlag(ctx, db.Engine, db.Catalog, db.Colls, end); err != nil {
		t.Fatal(err)
	}
	if m := load(); m.MinValid != end || m.InitialSyncFlag {
		t.Fatalf("after clearing the flag: %+v", m)
	}

	// Consistency: a null minValid never holds a member back, even with term -1 entries.
	if !(recovery.Markers{}).Consistent(optime.OpTime{TS: 5, Term: optime.UninitializedTerm}) {
		t.Fatal("null minValid is a constraint")
	}
	if (recovery.Markers{MinValid: end}).Consistent(optime.OpTime{TS: end.TS + 1, Term: 1}) {
		t.Fatal("an older term's entry reached minValid")
	}
	if !(recovery.Markers{MinValid: end}).Consistent(end) {
		t.Fatal("minValid itself is not consistent")
	}
}

// TestParseMarkersBadInput: local.replset.minvalid is writable by users (the local database
// always is): a malformed document is an error or ignored, never a panic.
func TestParseMarkersBadInput(t *testing.T) {
	if _, err := recovery.ParseMarkers(bsoncore.NewDocumentBuilder().AppendString("ts", "x").Build()); err == nil {
		t.Fatal("ts of the wrong type accepted")
	}
	m, err := recovery.ParseMarkers(bsoncore.NewDocumentBuilder().AppendTimestamp("ts", 3, 1).
		AppendString("t", "x").AppendInt32("doingInitialSync", 1).Build())
	if err != nil || m.InitialSyncFlag || m.MinValid.TS.Secs() != 3 {
		t.Fatalf("loose fields: %+v %v", m, err)
	}
	if m, err := recovery.ParseMarkers(nil); err != nil || m != (recovery.Markers{}) {
		t.Fatalf("no document: %+v %v", m, err)
	}
}
