package rangedel

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/operation"
	"humongo/internal/opobserver"
	"humongo/internal/storage"
)

// quiet drops the deleter's log in unit tests.
var quiet = slog.New(slog.DiscardHandler)

// recorder is an op observer remembering the namespaces and fromMigrate flags of deletes.
type recorder struct {
	opobserver.NoOp
	mu      sync.Mutex
	deletes map[string][]bool
}

func (r *recorder) OnDelete(_ *storage.RecoveryUnit, ns string, _ catalog.UUID, args *opobserver.OnDeleteArgs) error {
	fromMigrate := args.FromMigrate
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deletes[ns] = append(r.deletes[ns], fromMigrate)
	return nil
}

type params struct {
	mu sync.Mutex
	m  map[string]int64
}

func (p *params) get(name string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok := p.m[name]; ok {
		return v
	}
	switch name {
	case ParamOrphanCleanupDelaySecs:
		return DefaultOrphanCleanupDelaySecs
	case ParamBatchSize:
		return DefaultBatchSize
	}
	return DefaultBatchDelayMS
}

func (p *params) set(name string, v int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[name] = v
}

func openDB(t testing.TB) (*operation.DB, *recorder) {
	t.Helper()
	db, err := operation.OpenDB(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	rec := &recorder{deletes: map[string][]bool{}}
	db.SetObserver(rec)
	return db, rec
}

func insert(t testing.TB, db *operation.DB, ns string, docs ...bsoncore.Document) {
	t.Helper()
	ctx := context.Background()
	op := db.NewOp(ctx)
	defer op.Close()
	if err := op.WriteCollection(ctx, ns, true, func(c *index.Collection) error {
		_, err := c.InsertDocuments(op.RU, docs)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func doc(d bson.D) bsoncore.Document {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

func idKey(v any) bsoncore.Document { return doc(bson.D{{Key: "_id", Value: v}}) }

func collUUID(t testing.TB, db *operation.DB, ns string) catalog.UUID {
	t.Helper()
	op := db.NewOp(context.Background())
	defer op.Close()
	m, ok := op.Catalog().ByNS(ns)
	if !ok {
		t.Fatalf("%s does not exist", ns)
	}
	return m.UUID
}

// taskDoc is a config.rangeDeletions document over the shard key {_id: 1}.
func taskDoc(ns string, uuid catalog.UUID, min, max any, pending bool, when string) bsoncore.Document {
	d := bson.D{
		{Key: "_id", Value: bson.Binary{Subtype: bson.TypeBinaryUUID, Data: func() []byte { u := catalog.NewUUID(); return u[:] }()}},
		{Key: "nss", Value: ns},
		{Key: "collectionUuid", Value: bson.Binary{Subtype: bson.TypeBinaryUUID, Data: uuid[:]}},
		{Key: "donorShardId", Value: "shard0"},
		{Key: "range", Value: bson.D{{Key: "min", Value: bson.D{{Key: "_id", Value: min}}}, {Key: "max", Value: bson.D{{Key: "_id", Value: max}}}}},
	}
	if pending {
		d = append(d, bson.E{Key: "pending", Value: true})
	}
	d = append(d, bson.E{Key: "whenToClean", Value: when}, bson.E{Key: "keyPattern", Value: bson.D{{Key: "_id", Value: 1}}})
	return doc(d)
}

// ids returns the _id values of ns's documents, in storage order.
func ids(t *testing.T, db *operation.DB, ns string) []int32 {
	t.Helper()
	ctx := context.Background()
	op := db.NewOp(ctx)
	defer op.Close()
	rd, release, err := op.OpenRead(ctx, ns, operation.ReadAllRecords)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if rd.Meta() == nil {
		return nil
	}
	cur, err := rd.Records(op.RU)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var out []int32
	for {
		_, d, ok := cur.Next()
		if !ok {
			if err := cur.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		}
		out = append(out, bsoncore.Document(d).Lookup("_id").Int32())
	}
}

func numTasks(t *testing.T, s *Service) int {
	t.Helper()
	tasks, err := s.readTasks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(tasks)
}

// eventually polls cond (generous bound: the outcome does not depend on the timing).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func seed(t *testing.T, db *operation.DB, ns string, n int) catalog.UUID {
	docs := make([]bsoncore.Document, n)
	for i := range docs {
		docs[i] = doc(bson.D{{Key: "_id", Value: int32(i)}, {Key: "x", Value: "orphan"}})
	}
	insert(t, db, ns, docs...)
	return collUUID(t, db, ns)
}

// A ready task's range is deleted in batches of rangeDeleterBatchSize with
// rangeDeleterBatchDelayMS between them, as fromMigrate deletes, and its document removed; a
// pending task is never processed; WaitForOverlapping follows the task documents.
func TestExecutorDeletesReadyRangesInBatches(t *testing.T) {
	db, rec := openDB(t)
	uuid := seed(t, db, "test.c", 100)
	p := &params{m: map[string]int64{ParamBatchSize: 7, ParamBatchDelayMS: 30}}
	ready := taskDoc("test.c", uuid, 10, 60, false, CleanNow)
	pending := taskDoc("test.c", uuid, 70, 80, true, CleanNow)
	insert(t, db, TasksNS, ready, pending)

	s := Start(context.Background(), Config{DB: db, Log: quiet, Param: p.get, Poll: 10 * time.Millisecond})
	defer s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.WaitForOverlapping(ctx, uuid, idKey(0), idKey(65)); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	eventually(t, "the task's completion", func() bool { return s.Stats().TasksCompleted == 1 })

	st := s.Stats()
	if st.DocsDeleted != 50 || st.Batches != 8 { // 7 batches of 7, then 1
		t.Fatalf("stats %+v, want 50 documents in 8 batches", st)
	}
	if elapsed < 7*30*time.Millisecond {
		t.Fatalf("8 batches took %v: the 30 ms delays between them were not honoured", elapsed)
	}
	got := ids(t, db, "test.c")
	if len(got) != 50 {
		t.Fatalf("%d documents left, want 50", len(got))
	}
	for _, id := range got {
		if id >= 10 && id < 60 {
			t.Fatalf("document %d of the range survived", id)
		}
	}
	rec.mu.Lock()
	for _, fm := range rec.deletes["test.c"] {
		if !fm {
			t.Fatal("an orphan was deleted as a user's delete (fromMigrate unset)")
		}
	}
	rec.mu.Unlock()

	// The pending task stays through many passes, and so does its range.
	for i := 0; i < 10; i++ {
		s.Kick()
		time.Sleep(15 * time.Millisecond)
	}
	if numTasks(t, s) != 1 || len(ids(t, db, "test.c")) != 50 {
		t.Fatal("a pending task was processed")
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := s.WaitForOverlapping(short, uuid, idKey(75), idKey(76)); err == nil {
		t.Fatal("WaitForOverlapping returned while a pending task overlaps")
	}
	if err := s.WaitForOverlapping(ctx, uuid, idKey(80), idKey(90)); err != nil {
		t.Fatalf("no task overlaps [80, 90): %v", err)
	}
	if err := s.WaitForOverlapping(ctx, catalog.NewUUID(), idKey(75), idKey(76)); err != nil {
		t.Fatalf("another collection's task: %v", err)
	}
}

// rangeDeleterBatchSize 0 is the default (INT_MAX): the whole range in one batch.
func TestBatchSizeZeroIsUnlimited(t *testing.T) {
	db, _ := openDB(t)
	uuid := seed(t, db, "test.c", 300)
	p := &params{m: map[string]int64{ParamBatchSize: 0, ParamBatchDelayMS: 0}}
	insert(t, db, TasksNS, taskDoc("test.c", uuid, bson.MinKey{}, bson.MaxKey{}, false, CleanNow))
	s := Start(context.Background(), Config{DB: db, Log: quiet, Param: p.get, Poll: 10 * time.Millisecond})
	defer s.Stop()
	eventually(t, "the task's completion", func() bool { return s.Stats().TasksCompleted == 1 })
	if st := s.Stats(); st.DocsDeleted != 300 || st.Batches != 1 {
		t.Fatalf("stats %+v, want 300 documents in 1 batch", st)
	}
	if n := len(ids(t, db, "test.c")); n != 0 {
		t.Fatalf("%d documents left", n)
	}
}

// A task of a collection that is gone, or was re-created with another UUID, is dropped
// without deleting anything.
func TestTaskOfAnotherCollectionIsAbandoned(t *testing.T) {
	db, _ := openDB(t)
	seed(t, db, "test.c", 10)
	insert(t, db, TasksNS, taskDoc("test.c", catalog.NewUUID(), 0, 5, false, CleanNow),
		taskDoc("test.gone", catalog.NewUUID(), 0, 5, false, CleanNow))
	s := Start(context.Background(), Config{DB: db, Log: quiet, Poll: 10 * time.Millisecond})
	defer s.Stop()
	eventually(t, "the tasks' abandonment", func() bool { return s.Stats().TasksAbandoned == 2 })
	if numTasks(t, s) != 0 {
		t.Fatal("abandoned task documents remain")
	}
	if n := len(ids(t, db, "test.c")); n != 10 {
		t.Fatalf("%d documents left, want 10", n)
	}
}

// fakeNode is a replica-set member whose state the test sets.
type fakeNode struct {
	mu      sync.Mutex
	primary bool
	term    int64
	counter int64
	changed chan struct{}
}

func newFakeNode() *fakeNode { return &fakeNode{changed: make(chan struct{})} }

func (n *fakeNode) TopologyVersion() (int64, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.counter, n.changed
}
func (n *fakeNode) IsWritablePrimary() bool { n.mu.Lock(); defer n.mu.Unlock(); return n.primary }
func (n *fakeNode) Term() int64             { n.mu.Lock(); defer n.mu.Unlock(); return n.term }

func (n *fakeNode) set(primary bool, term int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.primary, n.term = primary, term
	n.counter++
	close(n.changed)
	n.changed = make(chan struct{})
}

// The executor runs on the primary only: nothing happens on a secondary, a step-down stops
// the executor (and the task waiting out its orphanCleanupDelaySecs), and the next step-up
// resubmits the task from config.rangeDeletions and finishes it.
func TestStepDownStopsAndStepUpResumes(t *testing.T) {
	db, _ := openDB(t)
	uuid := seed(t, db, "test.c", 20)
	insert(t, db, TasksNS, taskDoc("test.c", uuid, 0, 10, false, CleanDelayed))
	p := &params{m: map[string]int64{ParamOrphanCleanupDelaySecs: 3600, ParamBatchDelayMS: 0}}
	node := newFakeNode()
	var s *Service
	s = Start(context.Background(), Config{DB: db, Log: quiet, Node: node, Param: p.get, Poll: 10 * time.Millisecond})
	defer s.Stop()

	time.Sleep(50 * time.Millisecond)
	if s.Running() {
		t.Fatal("the executor runs on a secondary")
	}
	node.set(true, 1)
	eventually(t, "the executor's start on step-up", s.Running)
	time.Sleep(50 * time.Millisecond) // the task waits out the hour-long delay
	if n := len(ids(t, db, "test.c")); n != 20 {
		t.Fatalf("deleted before the cleanup delay: %d left", n)
	}
	node.set(false, 1)
	eventually(t, "the executor's stop on step-down", func() bool { return !s.Running() })

	// The delay is lowered while the node is a secondary: nothing runs until it steps up.
	p.set(ParamOrphanCleanupDelaySecs, 0)
	time.Sleep(50 * time.Millisecond)
	if n := len(ids(t, db, "test.c")); n != 20 || s.Stats().TasksCompleted != 0 {
		t.Fatal("a secondary deleted a range")
	}
	node.set(true, 2)
	eventually(t, "the task's completion after step-up", func() bool { return s.Stats().TasksCompleted == 1 })
	if n := len(ids(t, db, "test.c")); n != 10 {
		t.Fatalf("%d documents left, want 10", n)
	}
}

// A runtime change of orphanCleanupDelaySecs applies to a task already waiting.
func TestCleanupDelayChangeAppliesToWaitingTask(t *testing.T) {
	db, _ := openDB(t)
	uuid := seed(t, db, "test.c", 5)
	insert(t, db, TasksNS, taskDoc("test.c", uuid, bson.MinKey{}, bson.MaxKey{}, false, CleanDelayed))
	p := &params{m: map[string]int64{}} // 900 s
	var started atomic.Bool
	s := Start(context.Background(), Config{DB: db, Log: quiet, Param: func(name string) int64 {
		if name == ParamOrphanCleanupDelaySecs {
			started.Store(true)
		}
		return p.get(name)
	}, Poll: 10 * time.Millisecond})
	defer s.Stop()
	eventually(t, "the task's wait", started.Load)
	if s.Stats().TasksCompleted != 0 {
		t.Fatal("the 900 s delay was skipped")
	}
	p.set(ParamOrphanCleanupDelaySecs, 0)
	s.Kick()
	eventually(t, "the task's completion", func() bool { return s.Stats().TasksCompleted == 1 })
}

func TestParseTaskErrors(t *testing.T) {
	uuid := catalog.NewUUID()
	good := taskDoc("test.c", uuid, 0, 10, false, CleanNow)
	if _, err := ParseTask(good); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]bsoncore.Document{
		"empty range": taskDoc("test.c", uuid, 10, 10, false, CleanNow),
		"whenToClean": taskDoc("test.c", uuid, 0, 10, false, "later"),
		"no nss":      doc(bson.D{{Key: "_id", Value: 1}}),
	} {
		if _, err := ParseTask(d); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// A batch marks the task processing (and "now") and its numOrphanDocs follows the deletions,
// as $set and $inc would.
func TestTaskUpdate(t *testing.T) {
	uuid := catalog.NewUUID()
	d := taskDoc("test.c", uuid, 0, 10, false, CleanDelayed)
	marked := taskUpdate(d, true, 0)
	if p, _ := marked.Lookup("processing").BooleanOK(); !p {
		t.Fatalf("processing not set: %s", marked)
	}
	if w, _ := marked.Lookup("whenToClean").StringValueOK(); w != CleanNow {
		t.Fatalf("whenToClean %q", w)
	}
	withCount := doc(append(bson.D{}, bson.E{Key: "numOrphanDocs", Value: int64(10)}))
	if got := taskUpdate(withCount, false, -7).Lookup("numOrphanDocs").Int64(); got != 3 {
		t.Fatalf("numOrphanDocs %d, want 3", got)
	}
	if got := taskUpdate(marked, false, -2).Lookup("numOrphanDocs").Int64(); got != -2 {
		t.Fatalf("$inc of a missing numOrphanDocs: %d, want -2", got)
	}
	if again := taskUpdate(marked, true, 0); len(again) != len(marked) {
		t.Fatalf("marking twice changed the document: %s", again)
	}
}

// The deletion stops when its task document goes away between batches (the migration code
// removed it: the range may be this shard's again).
func TestDeletionStopsWhenTaskDocumentGoes(t *testing.T) {
	db, _ := openDB(t)
	uuid := seed(t, db, "test.c", 10)
	task := taskDoc("test.c", uuid, bson.MinKey{}, bson.MaxKey{}, false, CleanNow)
	insert(t, db, TasksNS, task)
	p := &params{m: map[string]int64{ParamBatchSize: 1, ParamBatchDelayMS: 500}}
	s := Start(context.Background(), Config{DB: db, Log: quiet, Param: p.get, Poll: 10 * time.Millisecond})
	defer s.Stop()
	eventually(t, "the first batch", func() bool { return s.Stats().DocsDeleted >= 1 })
	parsed, err := ParseTask(task)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.removeTask(context.Background(), &parsed); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // two more batch delays
	if n := len(ids(t, db, "test.c")); n < 8 {
		t.Fatalf("%d documents left: the deletion went on without its task document", n)
	}
	if st := s.Stats(); st.TasksCompleted != 0 {
		t.Fatalf("stats %+v", st)
	}
}
