package oplog_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

// node is one data node: storage, catalog, write path and (for a replica-set member) the
// oplog writer installed as the observer.
type node struct {
	t  *testing.T
	db *operation.DB
	w  *oplog.Writer
}

func openNode(t *testing.T, replSet bool) *node {
	t.Helper()
	db, err := operation.OpenDB(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	n := &node{t: t, db: db}
	if replSet {
		n.w, err = oplog.Open(context.Background(), oplog.Config{
			Engine: db.Engine, Catalog: db.Catalog, Colls: db.Colls,
			MaxSizeBytes: 64 << 20, Term: func() (int64, bool) { return 3, true }, TempDir: db.TempDir,
		})
		if err != nil {
			t.Fatal(err)
		}
		db.SetObserver(n.w)
	}
	return n
}

func mustDoc(t *testing.T, v any) bsoncore.Document {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// write runs f on ns's write path in one unit (creating ns implicitly).
func (n *node) write(ns string, f func(ru *storage.RecoveryUnit, c *index.Collection) error) {
	n.t.Helper()
	op := n.db.NewOp(context.Background())
	defer op.Close()
	err := op.WriteCollection(context.Background(), ns, true, func(c *index.Collection) error { return f(op.RU, c) })
	if err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) insert(ns string, docs ...any) {
	n.t.Helper()
	var ds []bsoncore.Document
	for _, d := range docs {
		ds = append(ds, mustDoc(n.t, d))
	}
	n.write(ns, func(ru *storage.RecoveryUnit, c *index.Collection) error {
		_, err := c.InsertDocuments(ru, ds)
		return err
	})
}

// oplogEntries reads the oplog with a forward cursor under ReadNoTimestamp (visibility
// applies).
func (n *node) oplogEntries() []bson.Raw {
	n.t.Helper()
	ru := n.db.Engine.NewRecoveryUnit()
	defer ru.Close()
	return readEntries(n.t, ru, n.w.Ident())
}

func readEntries(t testing.TB, ru *storage.RecoveryUnit, ident string) []bson.Raw {
	c, err := ru.NewCursor(ident, storage.CursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []bson.Raw
	for ok := c.First(); ok; ok = c.Next() {
		out = append(out, bson.Raw(slices.Clone(c.Value())))
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func entryTS(t testing.TB, e bson.Raw) optime.Timestamp {
	s, i, ok := e.Lookup("ts").TimestampOK()
	if !ok {
		t.Fatalf("entry without ts: %v", e)
	}
	return optime.MakeTimestamp(s, i)
}

// docsAt returns ns's documents (as extended JSON strings) read at ts (0: latest).
func (n *node) docsAt(ns string, ts optime.Timestamp) []string {
	n.t.Helper()
	m, ok := n.db.Catalog.Latest().ByNS(ns)
	if !ok {
		return nil
	}
	ru := n.db.Engine.NewRecoveryUnit()
	defer ru.Close()
	if ts != 0 {
		if err := ru.SetReadSource(storage.ReadProvided, ts); err != nil {
			n.t.Fatal(err)
		}
	}
	rs, err := storage.OpenRecordStore(n.db.Engine, m.Ident)
	if err != nil {
		n.t.Fatal(err)
	}
	cur, err := rs.NewCursor(ru, false)
	if err != nil {
		n.t.Fatal(err)
	}
	defer cur.Close()
	var out []string
	for {
		_, d, ok := cur.Next()
		if !ok {
			break
		}
		out = append(out, bson.Raw(d).String())
	}
	slices.Sort(out)
	return out
}

// strip returns e without the fields that vary between runs (ts, wall, ui).
func strip(t *testing.T, e bson.Raw) string {
	var d bson.D
	if err := bson.Unmarshal(e, &d); err != nil {
		t.Fatal(err)
	}
	var out bson.D
	for _, f := range d {
		switch f.Key {
		case "ts", "wall", "ui":
			continue
		}
		out = append(out, f)
	}
	b, _ := bson.MarshalExtJSON(out, false, false)
	return string(b)
}

func TestCRUDEntries(t *testing.T) {
	n := openNode(t, true)
	n.insert("test.c", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: "0123456789abcdef"}, {Key: "n", Value: 1}})
	// An $inc of n, as the update command would produce it: logged as the resulting value.
	n.write("test.c", func(ru *storage.RecoveryUnit, c *index.Collection) error {
		rid, old, ok, err := c.FindByID(ru, bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 1)})
		if err != nil || !ok {
			return fmt.Errorf("find: %v %v", ok, err)
		}
		return c.UpdateDocument(ru, rid, old, mustDoc(t, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: "0123456789abcdef"}, {Key: "n", Value: 2}, {Key: "b", Value: "x"}}))
	})
	n.write("test.c", func(ru *storage.RecoveryUnit, c *index.Collection) error {
		rid, old, _, err := c.FindByID(ru, bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 1)})
		if err != nil {
			return err
		}
		return c.DeleteDocument(ru, rid, old)
	})
	es := n.oplogEntries()
	want := []string{
		`{"op":"c","ns":"test.$cmd","o":{"create":"c","idIndex":{"v":2,"key":{"_id":1},"name":"_id_"}},"t":3,"v":2}`,
		`{"op":"i","ns":"test.c","o":{"_id":1,"a":"0123456789abcdef","n":1},"t":3,"v":2}`,
		`{"op":"u","ns":"test.c","o":{"$v":2,"diff":{"u":{"n":2},"i":{"b":"x"}}},"o2":{"_id":1},"t":3,"v":2}`,
		`{"op":"d","ns":"test.c","o":{"_id":1},"t":3,"v":2}`,
	}
	if len(es) != len(want) {
		t.Fatalf("got %d entries, want %d: %v", len(es), len(want), es)
	}
	m, _ := n.db.Catalog.Latest().ByNS("test.c")
	var prev optime.Timestamp
	for i, e := range es {
		if got := strip(t, e); got != want[i] {
			t.Errorf("entry %d:\n got %s\nwant %s", i, got, want[i])
		}
		if _, b, ok := e.Lookup("ui").BinaryOK(); !ok || !bytes.Equal(b, m.UUID[:]) {
			t.Errorf("entry %d: ui %v, want %s", i, e.Lookup("ui"), m.UUID)
		}
		if _, ok := e.Lookup("wall").DateTimeOK(); !ok {
			t.Errorf("entry %d: no wall date", i)
		}
		ts := entryTS(t, e)
		if ts <= prev {
			t.Errorf("entry %d: ts %v not above %v", i, ts, prev)
		}
		prev = ts
	}
	// The data version carries its entry's timestamp: invisible at ts-1, visible at ts.
	insTS, updTS, delTS := entryTS(t, es[1]), entryTS(t, es[2]), entryTS(t, es[3])
	if got := n.docsAt("test.c", insTS-1); len(got) != 0 {
		t.Errorf("at insert ts-1: %v", got)
	}
	if got := n.docsAt("test.c", insTS); len(got) != 1 || !bytes.Contains([]byte(got[0]), []byte(`"n": {"$numberInt":"1"}`)) {
		t.Errorf("at insert ts: %v", got)
	}
	if got := n.docsAt("test.c", updTS-1); len(got) != 1 || !bytes.Contains([]byte(got[0]), []byte(`"n": {"$numberInt":"1"}`)) {
		t.Errorf("at update ts-1: %v", got)
	}
	if got := n.docsAt("test.c", updTS); len(got) != 1 || !bytes.Contains([]byte(got[0]), []byte(`"n": {"$numberInt":"2"}`)) {
		t.Errorf("at update ts: %v", got)
	}
	if got := n.docsAt("test.c", delTS-1); len(got) != 1 {
		t.Errorf("at delete ts-1: %v", got)
	}
	if got := n.docsAt("test.c", delTS); len(got) != 0 {
		t.Errorf("at delete ts: %v", got)
	}
	if lw := n.w.LastWritten(); lw.TS != delTS || lw.Term != 3 {
		t.Errorf("LastWritten = %v, want {%v, 3}", lw, delTS)
	}
}

func TestVectoredInsertOneOpTimePerDocument(t *testing.T) {
	n := openNode(t, true)
	n.insert("test.v", bson.D{{Key: "_id", Value: -1}}) // create first
	const N = 10
	var docs []any
	for i := range N {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	n.insert("test.v", docs...)
	es := n.oplogEntries()[2:] // create, first insert
	if len(es) != N {
		t.Fatalf("%d entries for %d documents", len(es), N)
	}
	for i := 1; i < N; i++ {
		if entryTS(t, es[i]) <= entryTS(t, es[i-1]) {
			t.Fatalf("entry %d ts not increasing", i)
		}
	}
	mid := entryTS(t, es[N/2])
	got := n.docsAt("test.v", mid)
	if len(got) != 1+N/2+1 { // _id -1 plus documents 0..N/2
		t.Fatalf("snapshot at middle ts sees %d documents, want %d: %v", len(got), 1+N/2+1, got)
	}
	for i := 0; i <= N/2; i++ {
		if !slices.Contains(got, bson.Raw(mustDoc(t, bson.D{{Key: "_id", Value: i}})).String()) {
			t.Fatalf("snapshot at middle ts lacks document %d: %v", i, got)
		}
	}
}

func TestRolledBackUnitLeavesNoEntry(t *testing.T) {
	n := openNode(t, true)
	n.insert("test.r", bson.D{{Key: "_id", Value: 0}})
	before := len(n.oplogEntries())
	op := n.db.NewOp(context.Background())
	defer op.Close()
	err := op.WriteCollection(context.Background(), "test.r", false, func(c *index.Collection) error {
		if _, err := c.InsertDocuments(op.RU, []bsoncore.Document{mustDoc(t, bson.D{{Key: "_id", Value: 1}})}); err != nil {
			return err
		}
		return fmt.Errorf("abort")
	})
	if err == nil {
		t.Fatal("expected the unit to fail")
	}
	if got := len(n.oplogEntries()); got != before {
		t.Fatalf("rolled-back unit left %d entries", got-before)
	}
	// The abandoned slot is no hole: later entries are visible.
	n.insert("test.r", bson.D{{Key: "_id", Value: 2}})
	if got := len(n.oplogEntries()); got != before+1 {
		t.Fatalf("after a later insert: %d new entries, want 1", got-before)
	}
}

func TestStandaloneWritesNoOplog(t *testing.T) {
	n := openNode(t, false)
	n.insert("test.s", bson.D{{Key: "_id", Value: 1}})
	if _, ok := n.db.Catalog.Latest().ByNS(oplog.NS); ok {
		t.Fatal("standalone node has an oplog")
	}
	// A replica-set node does not log writes to `local` either.
	r := openNode(t, true)
	before := len(r.oplogEntries())
	r.insert("local.foo", bson.D{{Key: "_id", Value: 1}})
	if got := len(r.oplogEntries()); got != before {
		t.Fatalf("write to local logged %d entries", got-before)
	}
}

// TestConcurrentWritersNoVisibleHole runs 8 writers (some of whose units roll back) while a
// reader repeatedly scans the oplog forward: every scan must be a gap-free prefix of the
// final oplog.
func TestConcurrentWritersNoVisibleHole(t *testing.T) {
	n := openNode(t, true)
	n.insert("test.h", bson.D{{Key: "_id", Value: "seed"}})
	const writers, perWriter = 8, 60
	var wg sync.WaitGroup
	done := make(chan struct{})
	var scans [][]optime.Timestamp
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-done:
				return
			default:
			}
			ru := n.db.Engine.NewRecoveryUnit()
			var tss []optime.Timestamp
			for _, e := range readEntries(t, ru, n.w.Ident()) {
				tss = append(tss, entryTS(t, e))
			}
			ru.Close()
			scans = append(scans, tss)
		}
	}()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			op := n.db.NewOp(context.Background())
			defer op.Close()
			for i := range perWriter {
				doc := mustDoc(t, bson.D{{Key: "_id", Value: fmt.Sprintf("%d-%d", w, i)}})
				_ = op.WriteCollection(context.Background(), "test.h", false, func(c *index.Collection) error {
					if _, err := c.InsertDocuments(op.RU, []bsoncore.Document{doc}); err != nil {
						return err
					}
					if i%7 == 3 {
						return fmt.Errorf("roll back")
					}
					return nil
				})
			}
		}()
	}
	wg.Wait()
	close(done)
	<-readerDone
	var final []optime.Timestamp
	for _, e := range n.oplogEntries() {
		final = append(final, entryTS(t, e))
	}
	committed := writers * (perWriter - perWriter/7 - 1)
	if len(final) < committed {
		t.Fatalf("final oplog has %d entries, want at least %d", len(final), committed)
	}
	for si, s := range scans {
		if len(s) > len(final) || !slices.Equal(s, final[:len(s)]) {
			t.Fatalf("scan %d (%d entries) is not a prefix of the final oplog: a hole was visible", si, len(s))
		}
	}
	t.Logf("%d scans, %d entries", len(scans), len(final))
}
