package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/recordid"
	"humongo/internal/storage"
)

// ---- helpers ----

func openEngine(t *testing.T, dir string) *storage.Engine {
	t.Helper()
	opts := storage.Options{Dir: dir, InMemory: dir == ""}
	e, err := storage.Open(opts)
	if err != nil {
		t.Fatalf("storage.Open: %v", err)
	}
	return e
}

func openCatalog(t *testing.T, e *storage.Engine) *Catalog {
	t.Helper()
	// A long reap interval: tests drive phase two with ReapNow.
	c, err := OpenWithConfig(context.Background(), e, Config{ReapInterval: time.Hour, Logger: quietLog})
	if err != nil {
		t.Fatalf("catalog.Open: %v", err)
	}
	return c
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func setup(t *testing.T) (*storage.Engine, *Catalog) {
	t.Helper()
	e := openEngine(t, "")
	c := openCatalog(t, e)
	t.Cleanup(func() { _ = c.Close(); _ = e.Close() })
	return e, c
}

// inUnit runs f in a committed unit (at ts when non-zero) and returns the commit timestamp.
func inUnit(t *testing.T, e *storage.Engine, ts optime.Timestamp, f func(ru *storage.RecoveryUnit) error) (optime.Timestamp, error) {
	t.Helper()
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	w := ru.BeginUnitOfWork()
	defer w.End()
	if ts != 0 {
		if err := ru.SetCommitTimestamp(ts); err != nil {
			t.Fatalf("SetCommitTimestamp: %v", err)
		}
	}
	var commitTs optime.Timestamp
	ru.OnCommit(func(c optime.Timestamp) { commitTs = c })
	if err := f(ru); err != nil {
		return 0, err
	}
	if err := w.Commit(); err != nil {
		return 0, err
	}
	return commitTs, nil
}

func mustUnit(t *testing.T, e *storage.Engine, ts optime.Timestamp, f func(ru *storage.RecoveryUnit) error) optime.Timestamp {
	t.Helper()
	c, err := inUnit(t, e, ts, f)
	if err != nil {
		t.Fatalf("unit: %v", err)
	}
	return c
}

func doc(t *testing.T, v any) bsoncore.Document {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// D builds an ordered document from key, value pairs.
func D(kv ...any) bson.D {
	out := make(bson.D, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, bson.E{Key: kv[i].(string), Value: kv[i+1]})
	}
	return out
}

func ts(n uint32) optime.Timestamp { return optime.MakeTimestamp(100, n) }

func wantCode(t *testing.T, err error, code mongoerr.Code) {
	t.Helper()
	if !mongoerr.Is(err, code) {
		t.Fatalf("got %v, want code %v", err, code)
	}
}

// readerAt returns a recovery unit reading at ts.
func readerAt(t *testing.T, e *storage.Engine, at optime.Timestamp) *storage.RecoveryUnit {
	t.Helper()
	ru := e.NewRecoveryUnit()
	if err := ru.SetReadSource(storage.ReadProvided, at); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ru.Close)
	return ru
}

// summary renders a snapshot for comparisons across restarts.
func summary(s *Snapshot) string {
	var b strings.Builder
	for _, m := range s.All() {
		fmt.Fprintf(&b, "%s id=%d uuid=%s ident=%s opts=%s\n", m.NS, m.CatalogID, m.UUID, m.Ident, m.Options)
		for _, ix := range m.Indexes {
			fmt.Fprintf(&b, "  %s ident=%s ready=%v mk=%v paths=%v spec=%s\n", ix.Name, ix.Ident, ix.Ready, ix.Multikey, ix.MultikeyPaths, ix.Spec)
		}
	}
	return b.String()
}

// ---- tests ----

func TestCreateRenameDropRecreateRestart(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir)
	c := openCatalog(t, e)

	var created *CollectionMeta
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error {
		var err error
		created, err = c.CreateCollection(ru, "test.a", doc(t, D("validationLevel", "strict")))
		if err != nil {
			return err
		}
		_, err = c.AddIndex(ru, "test.a", doc(t, D("key", D("x", 1), "name", "x_1", "unique", true)), true, nil)
		return err
	})
	if len(created.Indexes) != 1 || created.Indexes[0].Name != "_id_" || !created.Indexes[0].Ready {
		t.Fatalf("want a ready _id index, got %+v", created.Indexes)
	}
	if !strings.HasPrefix(created.Ident, "collection-") || !strings.HasPrefix(created.Indexes[0].Ident, "index-") {
		t.Fatalf("bad idents %s %s", created.Ident, created.Indexes[0].Ident)
	}
	m, ok := c.Latest().ByNS("test.a")
	if !ok || len(m.Indexes) != 2 || !m.Indexes[1].Unique || m.MinValidSnapshot.IsNull() {
		t.Fatalf("after create: %+v", m)
	}

	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { return c.RenameCollection(ru, "test.a", "other.b", false) })
	if _, ok := c.Latest().ByNS("test.a"); ok {
		t.Fatal("old name still present")
	}
	r, ok := c.Latest().ByNS("other.b")
	if !ok || r.UUID != created.UUID || r.Ident != created.Ident || len(r.Indexes) != 2 {
		t.Fatalf("rename must keep uuid, ident, indexes: %+v", r)
	}
	if got, _ := c.Latest().ByUUID(created.UUID); got != r {
		t.Fatal("ByUUID does not follow the rename")
	}
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { return c.DropCollection(ru, "other.b") })
	if _, ok := c.Latest().ByUUID(created.UUID); ok {
		t.Fatal("dropped collection still present")
	}
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error {
		_, err := c.CreateCollection(ru, "other.b", nil)
		return err
	})
	re, _ := c.Latest().ByNS("other.b")
	if re.UUID == created.UUID || re.CatalogID == created.CatalogID {
		t.Fatal("recreated collection must be a new incarnation")
	}
	// Standalone (no oldest/stable): phase two happens right away.
	c.ReapNow()
	if e.HasIdent(created.Ident) || len(c.DropPending()) != 0 {
		t.Fatalf("old ident present=%v, pending %+v", e.HasIdent(created.Ident), c.DropPending())
	}
	before := summary(c.Latest())
	if got := strings.Join(c.Latest().Databases(), ","); got != "other" {
		t.Fatalf("Databases = %s", got)
	}

	// Restart from the same directory.
	_ = c.Close()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir)
	c = openCatalog(t, e)
	defer func() { _ = c.Close(); _ = e.Close() }()
	if after := summary(c.Latest()); after != before {
		t.Fatalf("catalog changed across restart:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// The durable entry has MongoDB's shape.
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	raw, found, err := ru.Get(catalogIdentName, recordid.Long(re.CatalogID).Key())
	if err != nil || !found {
		t.Fatalf("entry: %v %v", found, err)
	}
	d := bsoncore.Document(raw)
	for _, path := range [][]string{{"ident"}, {"idxIdent", "_id_"}, {"ns"}, {"md", "ns"}, {"md", "options", "uuid"},
		{"md", "indexes", "0", "spec", "key", "_id"}, {"md", "indexes", "0", "ready"}, {"md", "indexes", "0", "multikeyPaths", "_id"},
		{"md", "indexes", "0", "head"}} {
		if _, err := d.LookupErr(path...); err != nil {
			t.Errorf("entry lacks %v: %s", path, d)
		}
	}
	if st, _, _ := d.Lookup("md", "options", "uuid").BinaryOK(); st != 4 {
		t.Errorf("uuid subtype %d", st)
	}
}

func TestNamespaceAndIndexErrors(t *testing.T) {
	e, c := setup(t)
	for _, ns := range []string{"", "nodot", "a.", ".b", "a b.c", "a.b$c", "a/b.c", strings.Repeat("d", 64) + ".c", "a." + strings.Repeat("c", 300)} {
		_, err := inUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { _, err := c.CreateCollection(ru, ns, nil); return err })
		wantCode(t, err, mongoerr.InvalidNamespace)
	}
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { _, err := c.CreateCollection(ru, "db.c", nil); return err })
	_, err := inUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { _, err := c.CreateCollection(ru, "db.c", nil); return err })
	wantCode(t, err, mongoerr.NamespaceExists)
	if me, _ := mongoerr.As(err); me.Msg != "Collection db.c already exists." {
		t.Errorf("message %q", me.Msg)
	}
	_, err = inUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { return c.DropCollection(ru, "db.nope") })
	wantCode(t, err, mongoerr.NamespaceNotFound)
	_, err = inUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { return c.RenameCollection(ru, "db.nope", "db.x", false) })
	wantCode(t, err, mongoerr.NamespaceNotFound)
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { _, err := c.CreateCollection(ru, "db.d", nil); return err })
	_, err = inUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { return c.RenameCollection(ru, "db.c", "db.d", false) })
	wantCode(t, err, mongoerr.NamespaceExists)
	_, err = inUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { return c.RenameCollection(ru, "db.c", "local.d", false) })
	wantCode(t, err, mongoerr.IllegalOperation)
	_, err = inUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { return c.DropIndex(ru, "db.c", "_id_") })
	wantCode(t, err, mongoerr.InvalidOptions)
	_, err = inUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { return c.DropIndex(ru, "db.c", "zz") })
	wantCode(t, err, mongoerr.IndexNotFound)

	add := func(spec bson.D) error {
		_, err := inUnit(t, e, 0, func(ru *storage.RecoveryUnit) error {
			_, err := c.AddIndex(ru, "db.c", doc(t, spec), true, nil)
			return err
		})
		return err
	}
	if err := add(D("key", D("a", 1), "name", "a_1")); err != nil {
		t.Fatal(err)
	}
	wantCode(t, add(D("key", D("a", 1), "name", "a_1")), mongoerr.IndexAlreadyExists)
	wantCode(t, add(D("key", D("a", -1), "name", "a_1")), mongoerr.IndexKeySpecsConflict)
	wantCode(t, add(D("key", D("a", 1), "name", "a_1", "unique", true)), mongoerr.IndexOptionsConflict)
	wantCode(t, add(D("key", D("a", 1), "name", "other")), mongoerr.IndexOptionsConflict)
	// Same key, different partial filter: a different index, allowed.
	if err := add(D("key", D("a", 1), "name", "a_p", "partialFilterExpression", D("a", D("$gt", 1)))); err != nil {
		t.Fatal(err)
	}
	m, _ := c.Latest().ByNS("db.c")
	if len(m.Indexes) != 3 || m.Indexes[2].PartialFilterExpression == nil {
		t.Fatalf("indexes %+v", m.Indexes)
	}
	// A failed DDL leaves no trace, and the failing unit released the DDL mutex.
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { return c.DropIndex(ru, "db.c", "a_p") })
	if m, _ := c.Latest().ByNS("db.c"); len(m.Indexes) != 2 {
		t.Fatalf("after drop index: %+v", m.Indexes)
	}
	// Outside a unit: ErrNotInUnit.
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	if _, err := c.CreateCollection(ru, "db.z", nil); !errors.Is(err, storage.ErrNotInUnit) {
		t.Fatalf("outside unit: %v", err)
	}
}

func TestRollbackLeavesNothing(t *testing.T) {
	e, c := setup(t)
	identsBefore := strings.Join(e.ListIdents(), ",")
	ru := e.NewRecoveryUnit()
	w := ru.BeginUnitOfWork()
	m, err := c.CreateCollection(ru, "test.rb", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddIndex(ru, "test.rb", doc(t, D("key", D("b", 1), "name", "b_1")), false, nil); err != nil {
		t.Fatal(err)
	}
	if !e.HasIdent(m.Ident) {
		t.Fatal("ident should exist inside the unit")
	}
	if _, ok := c.Latest().ByNS("test.rb"); ok {
		t.Fatal("uncommitted collection visible in Latest")
	}
	w.End() // rollback
	ru.Close()
	if _, ok := c.Latest().ByNS("test.rb"); ok {
		t.Fatal("rolled-back collection present")
	}
	if got := strings.Join(e.ListIdents(), ","); got != identsBefore {
		t.Fatalf("idents after rollback %s, before %s", got, identsBefore)
	}
	// The DDL mutex was released: another DDL proceeds.
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { _, err := c.CreateCollection(ru, "test.rb", nil); return err })
	ru2 := e.NewRecoveryUnit()
	defer ru2.Close()
	s, err := c.At(ru2)
	if err != nil || s.Len() != 1 {
		t.Fatalf("durable catalog: %v len=%d", err, s.Len())
	}
}

func TestPointInTimeLookup(t *testing.T) {
	e, c := setup(t)
	e.SetOldestTimestamp(ts(1))
	mustUnit(t, e, ts(10), func(ru *storage.RecoveryUnit) error {
		_, err := c.CreateCollection(ru, "pit.c", nil)
		return err
	})
	mustUnit(t, e, ts(20), func(ru *storage.RecoveryUnit) error {
		_, err := c.AddIndex(ru, "pit.c", doc(t, D("key", D("k", 1), "name", "k_1")), true, nil)
		return err
	})
	mustUnit(t, e, ts(30), func(ru *storage.RecoveryUnit) error { return c.DropCollection(ru, "pit.c") })
	if c.Latest().DDLTimestamp() != ts(30) {
		t.Fatalf("DDL timestamp %v", c.Latest().DDLTimestamp())
	}
	cases := []struct {
		at      optime.Timestamp
		exists  bool
		indexes int
	}{{ts(5), false, 0}, {ts(10), true, 1}, {ts(15), true, 1}, {ts(20), true, 2}, {ts(29), true, 2}, {ts(30), false, 0}, {ts(40), false, 0}}
	for _, tc := range cases {
		s, err := c.At(readerAt(t, e, tc.at))
		if err != nil {
			t.Fatal(err)
		}
		m, ok := s.ByNS("pit.c")
		if ok != tc.exists || (ok && len(m.Indexes) != tc.indexes) {
			t.Errorf("at %v: exists=%v (want %v) meta=%+v", tc.at, ok, tc.exists, m)
		}
	}
	// Reads at or after the last DDL get Latest itself (no scan).
	if s, _ := c.At(readerAt(t, e, ts(40))); s != c.Latest() {
		t.Error("At after the last DDL should return Latest")
	}
}

func TestTwoPhaseDropKeepsOldReadsWorking(t *testing.T) {
	e, c := setup(t)
	e.SetOldestTimestamp(ts(1))
	var m *CollectionMeta
	mustUnit(t, e, ts(10), func(ru *storage.RecoveryUnit) error {
		var err error
		m, err = c.CreateCollection(ru, "tp.c", nil)
		return err
	})
	rs, err := storage.OpenRecordStore(e, m.Ident)
	if err != nil {
		t.Fatal(err)
	}
	var rid recordid.ID
	mustUnit(t, e, ts(20), func(ru *storage.RecoveryUnit) error {
		var err error
		rid, err = rs.Insert(ru, doc(t, D("_id", 1)))
		return err
	})
	mustUnit(t, e, ts(30), func(ru *storage.RecoveryUnit) error {
		if _, err := c.AddIndex(ru, "tp.c", doc(t, D("key", D("q", 1), "name", "q_1")), true, nil); err != nil {
			return err
		}
		return nil
	})
	mustUnit(t, e, ts(40), func(ru *storage.RecoveryUnit) error { return c.DropIndex(ru, "tp.c", "q_1") })
	mustUnit(t, e, ts(50), func(ru *storage.RecoveryUnit) error { return c.DropCollection(ru, "tp.c") })
	pend := c.DropPending()
	if len(pend) != 3 {
		t.Fatalf("drop pending %+v", pend)
	}
	for _, p := range pend {
		want := ts(50)
		if p.Index == "q_1" {
			want = ts(40)
		}
		if p.DropTimestamp != want {
			t.Errorf("%s dropped at %v, want %v", p.Ident, p.DropTimestamp, want)
		}
	}
	// Oldest (1) is before both drops: nothing is reaped, and a read at 45 still works.
	e.SetStableTimestamp(ts(60))
	if n := c.ReapNow(); n != 0 {
		t.Fatalf("reaped %d before oldest passed the drop", n)
	}
	read := func(at optime.Timestamp) {
		t.Helper()
		ru := readerAt(t, e, at)
		s, err := c.At(ru)
		if err != nil {
			t.Fatal(err)
		}
		old, ok := s.ByNS("tp.c")
		if !ok {
			t.Fatalf("collection missing at %v", at)
		}
		ors, err := storage.OpenRecordStore(e, old.Ident)
		if err != nil {
			t.Fatal(err)
		}
		if _, found, err := ors.Get(ru, rid); err != nil || !found {
			t.Fatalf("document at %v: found=%v err=%v", at, found, err)
		}
	}
	read(ts(45))
	// Oldest passes the index drop only: the index table goes, the collection stays.
	e.SetOldestTimestamp(ts(45))
	c.ReapNow()
	if p := c.DropPending(); len(p) != 2 || p[0].Index == "q_1" || p[1].Index == "q_1" {
		t.Fatalf("want only the index table reaped; pending %+v", p)
	}
	read(ts(45))
	// A pin defers phase two even once the timestamps allow it.
	release, ok := c.MarkIdentInUse(m.Ident)
	if !ok {
		t.Fatal("pin failed")
	}
	e.SetOldestTimestamp(ts(55))
	c.ReapNow()
	if !e.HasIdent(m.Ident) || e.HasIdent(m.Indexes[0].Ident) {
		t.Fatalf("with a pin on the collection table: collection=%v _id=%v", e.HasIdent(m.Ident), e.HasIdent(m.Indexes[0].Ident))
	}
	release()
	c.ReapNow()
	if e.HasIdent(m.Ident) || e.HasIdent(m.Indexes[0].Ident) || len(c.DropPending()) != 0 {
		t.Fatal("tables still present after phase two")
	}
	// Stale drop-pending records are deleted by the next DDL unit.
	mustUnit(t, e, ts(70), func(ru *storage.RecoveryUnit) error { _, err := c.CreateCollection(ru, "tp.next", nil); return err })
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	cur, err := ru.NewCursor(dropPendingIdentName, storage.CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if cur.First() {
		t.Fatalf("stale drop-pending record left: %q", cur.Key())
	}
}

func TestStableTimestampGatesReaping(t *testing.T) {
	e, c := setup(t)
	e.SetOldestTimestamp(ts(1))
	e.SetStableTimestamp(ts(2))
	mustUnit(t, e, ts(10), func(ru *storage.RecoveryUnit) error { _, err := c.CreateCollection(ru, "st.c", nil); return err })
	mustUnit(t, e, ts(20), func(ru *storage.RecoveryUnit) error { return c.DropCollection(ru, "st.c") })
	e.SetOldestTimestamp(ts(25)) // oldest past the drop, stable not
	if n := c.ReapNow(); n != 0 {
		t.Fatalf("reaped %d before stable passed the drop", n)
	}
	e.SetStableTimestamp(ts(21))
	c.ReapNow()
	if len(c.DropPending()) != 0 {
		t.Fatalf("pending %+v", c.DropPending())
	}
}

func TestCrashBetweenDropPhases(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir)
	c := openCatalog(t, e)
	e.SetOldestTimestamp(ts(1))
	e.SetStableTimestamp(ts(1))
	var m *CollectionMeta
	mustUnit(t, e, ts(10), func(ru *storage.RecoveryUnit) error {
		var err error
		m, err = c.CreateCollection(ru, "cr.c", nil)
		return err
	})
	mustUnit(t, e, ts(20), func(ru *storage.RecoveryUnit) error { return c.DropCollection(ru, "cr.c") })
	e.SetStableTimestamp(ts(25))
	_ = c.Close()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir)
	c = openCatalog(t, e)
	defer func() { _ = c.Close(); _ = e.Close() }()
	if !e.HasIdent(m.Ident) {
		t.Fatal("drop-pending table lost at restart")
	}
	if p := c.DropPending(); len(p) != 2 || p[0].DropTimestamp < ts(20) {
		t.Fatalf("drop pending after restart: %+v", p)
	}
	if _, ok := c.Latest().ByNS("cr.c"); ok {
		t.Fatal("dropped collection back after restart")
	}
	e.SetOldestTimestamp(ts(30))
	e.SetStableTimestamp(ts(30))
	c.ReapNow()
	if len(c.DropPending()) != 0 || e.HasIdent(m.Ident) {
		t.Fatalf("not reaped after restart: %+v", c.DropPending())
	}
}

func TestRecoverToStableAndReload(t *testing.T) {
	e, c := setup(t)
	mustUnit(t, e, ts(10), func(ru *storage.RecoveryUnit) error { _, err := c.CreateCollection(ru, "rs.keep", nil); return err })
	mustUnit(t, e, ts(12), func(ru *storage.RecoveryUnit) error { _, err := c.CreateCollection(ru, "rs.gone", nil); return err })
	e.SetStableTimestamp(ts(15))
	e.SetOldestTimestamp(ts(15))
	var late *CollectionMeta
	mustUnit(t, e, ts(20), func(ru *storage.RecoveryUnit) error {
		var err error
		late, err = c.CreateCollection(ru, "rs.late", nil)
		return err
	})
	mustUnit(t, e, ts(21), func(ru *storage.RecoveryUnit) error { return c.DropCollection(ru, "rs.gone") })
	mustUnit(t, e, ts(22), func(ru *storage.RecoveryUnit) error { return c.RenameCollection(ru, "rs.keep", "rs.renamed", false) })
	if _, err := e.RecoverToStable(); err != nil {
		t.Fatal(err)
	}
	if err := c.ReloadAfterRecovery(); err != nil {
		t.Fatal(err)
	}
	s := c.Latest()
	if _, ok := s.ByNS("rs.late"); ok {
		t.Error("collection created after stable survived recovery")
	}
	if e.HasIdent(late.Ident) || e.HasIdent(late.Indexes[0].Ident) {
		t.Error("tables of the rolled-back collection were not dropped")
	}
	if _, ok := s.ByNS("rs.gone"); !ok {
		t.Error("drop after stable was not rolled back")
	}
	if _, ok := s.ByNS("rs.keep"); !ok {
		t.Error("rename after stable was not rolled back")
	}
	if len(c.DropPending()) != 0 {
		t.Errorf("drop pending after recovery: %+v", c.DropPending())
	}
	// The resurrected collection's table is intact and stays so.
	g, _ := s.ByNS("rs.gone")
	e.SetOldestTimestamp(ts(100))
	e.SetStableTimestamp(ts(100))
	c.ReapNow()
	if !e.HasIdent(g.Ident) {
		t.Error("table of a live collection was reaped")
	}
}

func TestLocalDatabaseIsUntimestamped(t *testing.T) {
	e, c := setup(t)
	mustUnit(t, e, ts(10), func(ru *storage.RecoveryUnit) error {
		if _, err := c.CreateCollection(ru, "local.oplog.rs", doc(t, D("capped", true, "size", 1<<20))); err != nil {
			return err
		}
		_, err := c.CreateCollection(ru, "local.system.replset", nil)
		return err
	})
	op, _ := c.Latest().ByNS("local.oplog.rs")
	if len(op.Indexes) != 0 || !op.Capped || op.CatalogID >= 0 {
		t.Fatalf("oplog meta %+v", op)
	}
	e.SetStableTimestamp(ts(5))
	if _, err := e.RecoverToStable(); err != nil {
		t.Fatal(err)
	}
	if err := c.ReloadAfterRecovery(); err != nil {
		t.Fatal(err)
	}
	if c.Latest().Len() != 2 {
		t.Fatalf("local collections lost by recovery: %s", summary(c.Latest()))
	}
}

func TestMultikey(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir)
	c := openCatalog(t, e)
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error {
		if _, err := c.CreateCollection(ru, "mk.c", nil); err != nil {
			return err
		}
		_, err := c.AddIndex(ru, "mk.c", doc(t, D("key", D("a.b", 1, "c", 1), "name", "ab_c")), true, nil)
		return err
	})
	m, _ := c.Latest().ByNS("mk.c")
	ix, _ := m.Index("ab_c")
	if ix.Multikey || len(ix.MultikeyPaths) != 2 || len(ix.MultikeyPaths[0]) != 2 || len(ix.MultikeyPaths[1]) != 1 {
		t.Fatalf("initial multikey state %+v", ix)
	}
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error {
		return c.SetMultikey(ru, "mk.c", "ab_c", [][]bool{{false, true}, {false}})
	})
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error {
		return c.SetMultikey(ru, "mk.c", "ab_c", [][]bool{{true, false}, {false}})
	})
	m2, _ := c.Latest().ByNS("mk.c")
	ix, _ = m2.Index("ab_c")
	if !ix.Multikey || fmt.Sprint(ix.MultikeyPaths) != "[[true true] [false]]" {
		t.Fatalf("after union %+v", ix)
	}
	if m2.MinValidSnapshot != m.MinValidSnapshot {
		t.Error("a multikey update must not move the minimum valid snapshot")
	}
	// Already covered: no write, no new instance.
	cur := c.Latest()
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error {
		return c.SetMultikey(ru, "mk.c", "ab_c", [][]bool{{false, true}, {false}})
	})
	if c.Latest() != cur {
		t.Error("covered SetMultikey installed a new instance")
	}
	before := summary(c.Latest())
	_ = c.Close()
	_ = e.Close()
	e = openEngine(t, dir)
	c = openCatalog(t, e)
	defer func() { _ = c.Close(); _ = e.Close() }()
	if after := summary(c.Latest()); after != before {
		t.Fatalf("multikey lost across restart:\n%s\n%s", before, after)
	}
}

func TestSetIndexReadyAndUpdateOptions(t *testing.T) {
	e, c := setup(t)
	bu := NewUUID()
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error {
		if _, err := c.CreateCollection(ru, "ro.c", nil); err != nil {
			return err
		}
		_, err := c.AddIndex(ru, "ro.c", doc(t, D("key", D("z", 1), "name", "z_1")), false, &bu)
		return err
	})
	m, _ := c.Latest().ByNS("ro.c")
	ix, _ := m.Index("z_1")
	if ix.Ready || ix.BuildUUID == nil || *ix.BuildUUID != bu {
		t.Fatalf("in-progress index %+v", ix)
	}
	if len(m.ReadyIndexes()) != 1 {
		t.Fatal("only _id is ready")
	}
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { return c.SetIndexReady(ru, "ro.c", "z_1") })
	m, _ = c.Latest().ByNS("ro.c")
	ix, _ = m.Index("z_1")
	if !ix.Ready || ix.BuildUUID != nil {
		t.Fatalf("ready index %+v", ix)
	}
	uuid := m.UUID
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error {
		return c.UpdateOptions(ru, "ro.c", doc(t, D("validationLevel", "moderate")))
	})
	m, _ = c.Latest().ByNS("ro.c")
	if m.UUID != uuid || m.Options.Lookup("validationLevel").StringValue() != "moderate" {
		t.Fatalf("options %s", m.Options)
	}
	if u, _, _ := uuidFromOptions(m.Options); u != uuid {
		t.Fatal("options lost the uuid")
	}
}

// TestConcurrentDDL runs 50 goroutines of create/drop (and index churn) against readers
// using Latest and At, then checks nothing was lost, in memory and on disk.
func TestConcurrentDDL(t *testing.T) {
	e, c := setup(t)
	const workers = 50
	rounds := 6
	if testing.Short() {
		rounds = 3
	}
	ctx := context.Background()
	stop := make(chan struct{})
	var readers sync.WaitGroup
	var reads atomic.Int64
	for r := 0; r < 2; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := c.Latest()
				for _, db := range s.Databases() {
					cols := s.Collections(db)
					for i := 1; i < len(cols); i++ {
						if cols[i-1].UUID.Compare(cols[i].UUID) >= 0 {
							t.Error("Collections not in UUID order")
						}
					}
				}
				ru := e.NewRecoveryUnit()
				if _, err := c.At(ru); err != nil {
					t.Errorf("At: %v", err)
				}
				ru.Close()
				reads.Add(1)
			}
		}()
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			db := fmt.Sprintf("db%d", w%5)
			for i := 0; i < rounds; i++ {
				ns := fmt.Sprintf("%s.w%d_%d", db, w, i)
				op := func(f func(ru *storage.RecoveryUnit) error) error {
					return storage.WriteConflictRetry(ctx, "ddl", func() error {
						ru := e.NewRecoveryUnit()
						defer ru.Close()
						u := ru.BeginUnitOfWork()
						defer u.End()
						if err := f(ru); err != nil {
							return err
						}
						return u.Commit()
					})
				}
				if err := op(func(ru *storage.RecoveryUnit) error { _, err := c.CreateCollection(ru, ns, nil); return err }); err != nil {
					errs <- err
					return
				}
				if err := op(func(ru *storage.RecoveryUnit) error {
					_, err := c.AddIndex(ru, ns, doc(t, D("key", D("f", 1), "name", "f_1")), true, nil)
					return err
				}); err != nil {
					errs <- err
					return
				}
				if err := op(func(ru *storage.RecoveryUnit) error { return c.SetMultikey(ru, ns, "f_1", [][]bool{{true}}) }); err != nil {
					errs <- err
					return
				}
				if i%2 == 1 { // drop every other one
					if err := op(func(ru *storage.RecoveryUnit) error { return c.DropCollection(ru, ns) }); err != nil {
						errs <- err
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s := c.Latest()
	want := 0
	for w := 0; w < workers; w++ {
		for i := 0; i < rounds; i++ {
			ns := fmt.Sprintf("db%d.w%d_%d", w%5, w, i)
			m, ok := s.ByNS(ns)
			if ok != (i%2 == 0) {
				t.Fatalf("%s present=%v", ns, ok)
			}
			if ok {
				want++
				ix, _ := m.Index("f_1")
				if ix == nil || !ix.Multikey {
					t.Fatalf("%s lost its index or multikey flag: %+v", ns, m.Indexes)
				}
			}
		}
	}
	if s.Len() != want {
		t.Fatalf("Len %d want %d", s.Len(), want)
	}
	ru := e.NewRecoveryUnit()
	defer ru.Close()
	durable, err := c.At(ru)
	if err != nil {
		t.Fatal(err)
	}
	if summary(durable) != summary(s) {
		t.Fatalf("durable catalog differs from memory:\n%s\n%s", summary(durable), summary(s))
	}
	c.ReapNow()
	referenced := referencedIdents(s)
	for _, id := range e.ListIdents() {
		if isCatalogOwnedIdent(id) && !referenced[id] {
			t.Errorf("leaked ident %s", id)
		}
	}
	t.Logf("%d reads during the run", reads.Load())
}

// TestDDLSerialization: a second DDL unit waits for the first to finish, and both survive.
func TestDDLSerialization(t *testing.T) {
	e, c := setup(t)
	ru1 := e.NewRecoveryUnit()
	defer ru1.Close()
	w1 := ru1.BeginUnitOfWork()
	if _, err := c.CreateCollection(ru1, "ser.a", nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := inUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { _, err := c.CreateCollection(ru, "ser.a", nil); return err })
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("second DDL did not wait: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := w1.Commit(); err != nil {
		t.Fatal(err)
	}
	w1.End()
	// The waiter now sees the committed collection.
	wantCode(t, <-done, mongoerr.NamespaceExists)
}

func TestCorruptEntryIsAnError(t *testing.T) {
	e := openEngine(t, "")
	defer e.Close()
	c := openCatalog(t, e)
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { _, err := c.CreateCollection(ru, "co.c", nil); return err })
	m, _ := c.Latest().ByNS("co.c")
	_ = c.Close()
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error {
		return ru.Put(catalogIdentName, recordid.Long(m.CatalogID).Key(), []byte{9, 0, 0, 0, 2, 'x', 0, 0xff})
	})
	if _, err := OpenWithConfig(context.Background(), e, Config{Logger: quietLog}); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("open with corrupt entry: %v", err)
	}
	// Fuzz-ish: truncations of a valid entry never panic.
	raw := encodeEntry(m)
	for i := 0; i < len(raw); i++ {
		_, _ = decodeEntry(1, raw[:i])
	}
}

func TestMissingIdentIsAnError(t *testing.T) {
	e := openEngine(t, "")
	defer e.Close()
	c := openCatalog(t, e)
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error { _, err := c.CreateCollection(ru, "mi.c", nil); return err })
	m, _ := c.Latest().ByNS("mi.c")
	_ = c.Close()
	if err := e.DropIdent(m.Ident); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenWithConfig(context.Background(), e, Config{Logger: quietLog}); err == nil || !strings.Contains(err.Error(), "mi.c") {
		t.Fatalf("open with a missing table: %v", err)
	}
}

func TestOrphanIdentsDroppedAtOpen(t *testing.T) {
	e := openEngine(t, "")
	defer e.Close()
	c := openCatalog(t, e)
	_ = c.Close()
	orphan := e.NewIdentName("collection")
	other := "other-keepme"
	for _, n := range []string{orphan, other} {
		if err := e.CreateIdent(n, storage.IdentOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c = openCatalog(t, e)
	defer c.Close()
	if e.HasIdent(orphan) || !e.HasIdent(other) {
		t.Fatalf("orphan present=%v other present=%v", e.HasIdent(orphan), e.HasIdent(other))
	}
}

// TestIndexBuildTempIdentsDroppedAtOpen: the temporary tables of an index build interrupted by
// a crash (names as internal/index creates them) are dropped at startup, in a reopened
// on-disk engine, but not by ReloadAfterRecovery (a build of this process may own them).
func TestIndexBuildTempIdentsDroppedAtOpen(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir)
	c := openCatalog(t, e)
	var temps []string
	for _, kind := range []string{"internal-sidewrites", "internal-skipped", "internal-dupkeys"} {
		n := e.NewIdentName(kind)
		if err := e.CreateIdent(n, storage.IdentOptions{}); err != nil {
			t.Fatal(err)
		}
		temps = append(temps, n)
	}
	if err := c.ReloadAfterRecovery(); err != nil {
		t.Fatal(err)
	}
	for _, n := range temps {
		if !e.HasIdent(n) {
			t.Fatalf("ReloadAfterRecovery dropped %s", n)
		}
	}
	_ = c.Close()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir)
	defer e.Close()
	c = openCatalog(t, e)
	defer c.Close()
	for _, n := range temps {
		if e.HasIdent(n) {
			t.Fatalf("temporary ident %s survived a restart", n)
		}
	}
}

func TestUUID(t *testing.T) {
	u := NewUUID()
	if u[6]>>4 != 4 || u[8]&0xc0 != 0x80 {
		t.Fatalf("not a v4 uuid: %s", u)
	}
	p, err := ParseUUID(u.String())
	if err != nil || p != u {
		t.Fatalf("round trip %s: %v", u, err)
	}
	if _, err := ParseUUID("nope"); err == nil {
		t.Fatal("bad uuid parsed")
	}
	given := NewUUID()
	e, c := setup(t)
	mustUnit(t, e, 0, func(ru *storage.RecoveryUnit) error {
		_, err := c.CreateCollection(ru, "u.c", doc(t, D("uuid", bson.Binary{Subtype: 4, Data: given[:]})))
		return err
	})
	if m, _ := c.Latest().ByNS("u.c"); m.UUID != given {
		t.Fatalf("uuid from options not used: %s", m.UUID)
	}
	_, err = inUnit(t, e, 0, func(ru *storage.RecoveryUnit) error {
		_, err := c.CreateCollection(ru, "u.d", doc(t, D("uuid", bson.Binary{Subtype: 4, Data: given[:]})))
		return err
	})
	wantCode(t, err, mongoerr.InvalidOptions)
}
