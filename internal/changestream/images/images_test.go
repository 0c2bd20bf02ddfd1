package images_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/changestream/images"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/repl/oplog"
	"humongo/internal/storage"
)

func mustDoc(t testing.TB, v any) bsoncore.Document {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPostImage: the post-image is the pre-image with the update entry's $v:2 diff applied
// (the diffs the oplog writer logs), or the replacement document itself.
func TestPostImage(t *testing.T) {
	cases := []struct{ pre, post bson.D }{
		{bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 2}}},
		{bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "b", Value: "long enough to diff"}},
			bson.D{{Key: "_id", Value: 1}, {Key: "b", Value: "long enough to diff"}, {Key: "c", Value: true}}},
		{bson.D{{Key: "_id", Value: 1}, {Key: "s", Value: bson.D{{Key: "p", Value: 1}, {Key: "q", Value: "some text that stays"}}}, {Key: "arr", Value: bson.A{1, 2, 3}}},
			bson.D{{Key: "_id", Value: 1}, {Key: "s", Value: bson.D{{Key: "p", Value: 6}, {Key: "q", Value: "some text that stays"}}}, {Key: "arr", Value: bson.A{1, 2, 3, 4}}}},
		{bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}, bson.D{{Key: "_id", Value: 1}, {Key: "y", Value: "replaced entirely"}}},
	}
	for i, c := range cases {
		pre, post := mustDoc(t, c.pre), mustDoc(t, c.post)
		o, err := oplog.UpdateO(pre, post)
		if err != nil {
			t.Fatal(err)
		}
		got, err := images.PostImage(pre, o)
		if err != nil {
			t.Fatalf("case %d (o %s): %v", i, bson.Raw(o), err)
		}
		if !bytes.Equal(got, post) {
			t.Errorf("case %d (o %s): post-image %s, want %s", i, bson.Raw(o), bson.Raw(got), bson.Raw(post))
		}
	}
	if _, err := images.PostImage(mustDoc(t, bson.D{{Key: "_id", Value: 1}}), mustDoc(t, bson.D{{Key: "$v", Value: 1}, {Key: "diff", Value: bson.D{}}})); !mongoerr.Is(err, mongoerr.BadValue) {
		t.Errorf("$v: 1: %v, want BadValue", err)
	}
	if _, err := images.PostImage(mustDoc(t, bson.D{{Key: "_id", Value: 1}}), mustDoc(t, bson.D{{Key: "$v", Value: 2}})); !mongoerr.Is(err, mongoerr.BadValue) {
		t.Errorf("$v: 2 without diff: %v, want BadValue", err)
	}
}

// member is a replica-set data node driven through its write path: storage, the oplog writer
// as op observer (which creates config.system.preimages).
type member struct {
	t  *testing.T
	db *operation.DB
	w  *oplog.Writer
}

func newMember(t *testing.T) *member {
	t.Helper()
	db, err := operation.OpenDB(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	w, err := oplog.Open(context.Background(), oplog.Config{Engine: db.Engine, Catalog: db.Catalog, Colls: db.Colls,
		MaxSizeBytes: 64 << 20, Term: func() (int64, bool) { return 1, true }, TempDir: db.TempDir})
	if err != nil {
		t.Fatal(err)
	}
	db.SetObserver(w)
	return &member{t: t, db: db, w: w}
}

// create makes ns with options (logged, as the create command does).
func (m *member) create(ns string, options bson.D) catalog.UUID {
	m.t.Helper()
	op := m.db.NewOp(context.Background())
	defer op.Close()
	var opts bsoncore.Document
	if options != nil {
		opts = mustDoc(m.t, options)
	}
	if err := op.EnsureCollection(context.Background(), ns, opts); err != nil {
		m.t.Fatal(err)
	}
	meta, _ := m.db.Catalog.Latest().ByNS(ns)
	return meta.UUID
}

func (m *member) write(ns string, f func(ru *storage.RecoveryUnit, c *index.Collection) error) {
	m.t.Helper()
	op := m.db.NewOp(context.Background())
	defer op.Close()
	if err := op.WriteCollection(context.Background(), ns, false, func(c *index.Collection) error { return f(op.RU, c) }); err != nil {
		m.t.Fatal(err)
	}
}

// entries returns the oplog's u and d entries of collection uuid.
func (m *member) entries(uuid catalog.UUID) []bson.Raw {
	m.t.Helper()
	ru := m.db.Engine.NewRecoveryUnit()
	defer ru.Close()
	c, err := ru.NewCursor(m.w.Ident(), storage.CursorOptions{})
	if err != nil {
		m.t.Fatal(err)
	}
	defer c.Close()
	var out []bson.Raw
	for ok := c.First(); ok; ok = c.Next() {
		e := bson.Raw(slices.Clone(c.Value()))
		op := e.Lookup("op").StringValue()
		if _, ui, ok := e.Lookup("ui").BinaryOK(); ok && bytes.Equal(ui, uuid[:]) && (op == "u" || op == "d") {
			out = append(out, e)
		}
	}
	return out
}

func entryTS(e bson.Raw) optime.Timestamp {
	s, i := e.Lookup("ts").Timestamp()
	return optime.MakeTimestamp(s, i)
}

// count is the number of pre-images on the node.
func (m *member) count() int {
	m.t.Helper()
	meta, _ := m.db.Catalog.Latest().ByNS(images.NS)
	c, err := m.db.Colls.ByUUID(meta.UUID)
	if err != nil {
		m.t.Fatal(err)
	}
	n, _ := c.RecordStore().Counts()
	return int(n)
}

var (
	enabledOpts = bson.D{{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}
	doc1        = bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "text", Value: "a field long enough to make a diff"}}
)

func updateA(ru *storage.RecoveryUnit, c *index.Collection, id int32, a int32) error {
	rid, cur, found, err := c.FindByID(ru, bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, id)})
	if err != nil || !found {
		return mongoerr.Newf(mongoerr.NoSuchKey, "no document %d: %v", id, err)
	}
	next := bsoncore.NewDocumentBuilder().AppendInt32("_id", id).AppendInt32("a", a).
		AppendString("text", "a field long enough to make a diff").Build()
	return c.UpdateDocument(ru, rid, slices.Clone(cur), next)
}

// TestPreImageLookup: the stream finds an update's pre-image by (collection, entry ts, 0),
// reading at the entry's timestamp, and gets the post-image from it and the entry's o;
// Enabled follows the option; a collection without it, or another timestamp, finds none.
func TestPreImageLookup(t *testing.T) {
	m := newMember(t)
	on := m.create("test.on", enabledOpts)
	off := m.create("test.off", nil)
	for _, ns := range []string{"test.on", "test.off"} {
		m.write(ns, func(ru *storage.RecoveryUnit, c *index.Collection) error {
			_, err := c.InsertDocuments(ru, []bsoncore.Document{mustDoc(t, doc1)})
			return err
		})
		m.write(ns, func(ru *storage.RecoveryUnit, c *index.Collection) error { return updateA(ru, c, 1, 2) })
	}
	snap := m.db.Catalog.Latest()
	if !images.Enabled(snap, on) || images.Enabled(snap, off) || images.Enabled(snap, catalog.UUID{1}) {
		t.Fatalf("Enabled: on %v, off %v, missing %v", images.Enabled(snap, on), images.Enabled(snap, off), images.Enabled(snap, catalog.UUID{1}))
	}
	es := m.entries(on)
	if len(es) != 1 {
		t.Fatalf("%d update entries, want 1", len(es))
	}
	ts := entryTS(es[0])
	ru := m.db.Engine.NewRecoveryUnit()
	defer ru.Close()
	if err := ru.SetReadSource(storage.ReadProvided, ts); err != nil {
		t.Fatal(err)
	}
	pre, ok, err := images.PreImage(context.Background(), ru, m.db.Colls, on, ts, 0)
	if err != nil || !ok {
		t.Fatalf("PreImage: found %v, %v", ok, err)
	}
	if !bytes.Equal(pre, mustDoc(t, doc1)) {
		t.Errorf("pre-image %s, want %s", bson.Raw(pre), bson.Raw(mustDoc(t, doc1)))
	}
	post, err := images.PostImage(pre, bsoncore.Document(es[0].Lookup("o").Document()))
	if err != nil {
		t.Fatal(err)
	}
	if got := bson.Raw(post).Lookup("a").Int32(); got != 2 {
		t.Errorf("post-image %s, want a: 2", bson.Raw(post))
	}
	// Not visible below its timestamp; none at another index or for the other collection.
	ru.AbandonSnapshot()
	if err := ru.SetReadSource(storage.ReadProvided, ts-1); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := images.PreImage(context.Background(), ru, m.db.Colls, on, ts, 0); ok || err != nil {
		t.Errorf("PreImage below its timestamp: found %v, %v", ok, err)
	}
	ru.AbandonSnapshot()
	if err := ru.SetReadSource(storage.ReadNoTimestamp, 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		uuid catalog.UUID
		idx  int
	}{{on, 1}, {off, 0}} {
		if _, ok, err := images.PreImage(context.Background(), ru, m.db.Colls, c.uuid, ts, c.idx); ok || err != nil {
			t.Errorf("PreImage(%v, %d): found %v, %v", c.uuid, c.idx, ok, err)
		}
	}
	if m.count() != 1 {
		t.Errorf("%d pre-images, want 1", m.count())
	}
}

// TestNoPreImageError: MongoDB's NoMatchingDocument and message naming the event.
func TestNoPreImageError(t *testing.T) {
	event := mustDoc(t, bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "82"}}}, {Key: "operationType", Value: "update"},
		{Key: "clusterTime", Value: bson.Timestamp{T: 7, I: 3}}, {Key: "ns", Value: bson.D{{Key: "db", Value: "test"}, {Key: "coll", Value: "c"}}}})
	err := images.NoPreImageError(event)
	if !mongoerr.Is(err, mongoerr.NoMatchingDocument) {
		t.Fatalf("code: %v", err)
	}
	want := `Change stream was configured to require a pre-image for all update, delete and replace events, but the pre-image was not found for event: {operationType: "update", ns: {db: "test", coll: "c"}, clusterTime: Timestamp(7, 3)}`
	if e, _ := mongoerr.As(err); e == nil || e.Msg != want {
		got := err.Error()
		t.Errorf("message:\n got %s\nwant %s", got, want)
	}
	if !mongoerr.Is(images.NoPostImageError(event), mongoerr.NoMatchingDocument) {
		t.Error("NoPostImageError: not NoMatchingDocument")
	}
}

// TestRemover: a pass removes pre-images whose oplog entry is gone (the oplog truncated
// below them), those older than expireAfterSeconds by the injected clock while the
// parameter is set, and those of a dropped collection; it keeps the rest.
func TestRemover(t *testing.T) {
	m := newMember(t)
	uuid := m.create("test.c", enabledOpts)
	m.create("test.d", enabledOpts)
	for _, ns := range []string{"test.c", "test.d"} {
		m.write(ns, func(ru *storage.RecoveryUnit, c *index.Collection) error {
			_, err := c.InsertDocuments(ru, []bsoncore.Document{mustDoc(t, doc1)})
			return err
		})
	}
	for a := int32(2); a <= 5; a++ {
		m.write("test.c", func(ru *storage.RecoveryUnit, c *index.Collection) error { return updateA(ru, c, 1, a) })
	}
	m.write("test.d", func(ru *storage.RecoveryUnit, c *index.Collection) error { return updateA(ru, c, 1, 9) })
	if m.count() != 5 {
		t.Fatalf("%d pre-images, want 5", m.count())
	}
	es := m.entries(uuid)
	var expire int64
	var expireOn bool
	now := time.Now()
	r := &images.Remover{DB: m.db,
		ExpireAfterSeconds: func(context.Context) (int64, bool, error) { return expire, expireOn, nil },
		Now:                func() time.Time { return now }}
	remove := func(want int) {
		t.Helper()
		n, err := r.RemoveExpired(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Fatalf("removed %d, want %d", n, want)
		}
	}
	remove(0)

	// Truncate the oplog below test.c's third update: its first two pre-images go.
	ru := m.db.Engine.NewRecoveryUnit()
	func() {
		defer ru.Close()
		w := ru.BeginUnitOfWork()
		defer w.End()
		c, err := ru.NewCursor(m.w.Ident(), storage.CursorOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var keys [][]byte
		for ok := c.First(); ok; ok = c.Next() {
			if entryTS(bson.Raw(c.Value())) >= entryTS(es[2]) {
				break
			}
			keys = append(keys, slices.Clone(c.Key()))
		}
		c.Close()
		for _, k := range keys {
			if err := ru.Delete(m.w.Ident(), k); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}()
	remove(2)
	if m.count() != 3 {
		t.Fatalf("%d pre-images left, want 3", m.count())
	}
	rd := m.db.Engine.NewRecoveryUnit()
	defer rd.Close()
	for i, e := range es {
		_, ok, err := images.PreImage(context.Background(), rd, m.db.Colls, uuid, entryTS(e), 0)
		if err != nil || ok != (i >= 2) {
			t.Errorf("pre-image of update %d: found %v (%v), want %v", i, ok, err, i >= 2)
		}
		rd.AbandonSnapshot()
	}

	// expireAfterSeconds: nothing is an hour old; an hour later everything is.
	expire, expireOn = 3600, true
	remove(0)
	now = now.Add(2 * time.Hour)
	expireOn = false
	remove(0) // "off": the clock alone expires nothing
	expireOn = true
	remove(3)

	// A dropped collection's pre-images go at the next pass.
	m.write("test.c", func(ru *storage.RecoveryUnit, c *index.Collection) error { return updateA(ru, c, 1, 6) })
	now = time.Now()
	op := m.db.NewOp(context.Background())
	if err := op.DDL(context.Background(), "test.c", func() error { return m.db.Catalog.DropCollection(op.RU, "test.c") }); err != nil {
		t.Fatal(err)
	}
	op.Close()
	remove(1)
	if m.count() != 0 {
		t.Errorf("%d pre-images left, want 0", m.count())
	}

	// Run stops with its context.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r.Interval = time.Millisecond
	go func() { r.Run(ctx); close(done) }()
	time.Sleep(5 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
}

// TestParseOptions: changeStreamOptions' validation (BadValue) and canonical form.
func TestParseOptions(t *testing.T) {
	val := func(v any) bsoncore.Value {
		d := mustDoc(t, bson.D{{Key: "v", Value: v}})
		return d.Lookup("v")
	}
	for _, bad := range []any{
		1, bson.D{}, bson.D{{Key: "preAndPostImages", Value: bson.D{}}},
		bson.D{{Key: "preAndPostImages", Value: bson.D{{Key: "expireAfterSeconds", Value: "unknown"}}}},
		bson.D{{Key: "preAndPostImages", Value: bson.D{{Key: "expireAfterSeconds", Value: -1}}}},
		bson.D{{Key: "preAndPostImages", Value: bson.D{{Key: "expireAfterSeconds", Value: 0}}}},
		bson.D{{Key: "preAndPostImages", Value: bson.D{{Key: "expireAfterSeconds", Value: 10}, {Key: "x", Value: 1}}}},
	} {
		if _, err := images.ParseOptions(val(bad)); !mongoerr.Is(err, mongoerr.BadValue) {
			t.Errorf("%v: %v, want BadValue", bad, err)
		}
	}
	d, err := images.ParseOptions(val(bson.D{{Key: "preAndPostImages", Value: bson.D{{Key: "expireAfterSeconds", Value: int32(10)}}}}))
	if err != nil {
		t.Fatal(err)
	}
	if n, on := images.ExpireAfterSeconds(d); !on || n != 10 {
		t.Errorf("ExpireAfterSeconds(%s) = %d, %v", bson.Raw(d), n, on)
	}
	if got := bson.Raw(d).String(); got != `{"preAndPostImages": {"expireAfterSeconds": {"$numberLong":"10"}}}` {
		t.Errorf("canonical form %s", got)
	}
	d, err = images.ParseOptions(val(bson.D{{Key: "preAndPostImages", Value: bson.D{{Key: "expireAfterSeconds", Value: "off"}}}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, on := images.ExpireAfterSeconds(d); on {
		t.Error(`"off" turned expiry on`)
	}
}
