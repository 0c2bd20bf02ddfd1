package primaryonly

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// fakeNode is a replication coordinator whose state the test sets.
type fakeNode struct {
	mu      sync.Mutex
	counter int64
	changed chan struct{}
	primary bool
	term    int64
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

// world is a service over a fake node and an in-memory state collection whose instances
// run until the test releases them.
type world struct {
	t    *testing.T
	node *fakeNode
	svc  *Service

	mu       sync.Mutex
	docs     map[string]bsoncore.Document
	starts   map[string]int
	release  map[string]chan struct{}
	started  chan string
	loadGate chan struct{} // when set, Load waits for it
	loading  chan struct{} // closed when a Load begins waiting on loadGate
	events   []string      // reacquisitions and inserts, in order
}

func newWorld(t *testing.T, ids ...string) *world {
	w := &world{t: t, node: newFakeNode(), docs: map[string]bsoncore.Document{}, starts: map[string]int{},
		release: map[string]chan struct{}{}, started: make(chan string, 100)}
	for _, id := range ids {
		w.docs[id] = stateDoc(id, "x")
	}
	w.svc = Start(Config{
		Name: "TestService",
		Node: w.node,
		Load: func(ctx context.Context) ([]bsoncore.Document, error) {
			w.mu.Lock()
			gate, loading := w.loadGate, w.loading
			w.mu.Unlock()
			if gate != nil {
				close(loading)
				select {
				case <-gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			var out []bsoncore.Document
			for _, id := range slices.Sorted(mapsKeys(w.docs)) {
				out = append(out, w.docs[id])
			}
			return out, nil
		},
		Insert: func(ctx context.Context, doc bsoncore.Document) error {
			w.mu.Lock()
			defer w.mu.Unlock()
			id := doc.Lookup("_id").StringValue()
			if _, ok := w.docs[id]; ok {
				return mongoerr.Newf(mongoerr.DuplicateKey, "duplicate %s", id)
			}
			w.docs[id] = doc
			w.events = append(w.events, "insert "+id)
			return nil
		},
		ID: func(doc bsoncore.Document) (string, error) {
			id, ok := doc.Lookup("_id").StringValueOK()
			if !ok {
				return "", errors.New("no _id")
			}
			return id, nil
		},
		New: func(doc bsoncore.Document) (Instance, error) {
			inst := &testInstance{w: w, id: doc.Lookup("_id").StringValue(), opt: doc.Lookup("opt").StringValue()}
			if inst.opt == "reacquire" {
				return &reacquiringInstance{inst}, nil
			}
			return inst, nil
		},
	})
	t.Cleanup(w.svc.Stop)
	return w
}

func mapsKeys(m map[string]bsoncore.Document) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func stateDoc(id, opt string) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("_id", id).AppendString("opt", opt).Build()
}

type testInstance struct {
	w       *world
	id, opt string
}

func (i *testInstance) Run(ctx context.Context) error {
	w := i.w
	w.mu.Lock()
	w.starts[i.id]++
	ch := w.release[i.id]
	if ch == nil {
		ch = make(chan struct{})
		w.release[i.id] = ch
	}
	w.mu.Unlock()
	w.started <- i.id
	select {
	case <-ch:
		w.mu.Lock()
		delete(w.docs, i.id)
		w.mu.Unlock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (i *testInstance) CheckJoin(doc bsoncore.Document) error {
	if doc.Lookup("opt").StringValue() != i.opt {
		return mongoerr.Newf(mongoerr.ConflictingOperationInProgress, "%s is running with other options", i.id)
	}
	return nil
}

// reacquiringInstance records its Reacquire (primaryonly.Reacquirer).
type reacquiringInstance struct{ *testInstance }

func (i *reacquiringInstance) Reacquire() error {
	i.w.mu.Lock()
	defer i.w.mu.Unlock()
	i.w.events = append(i.w.events, "reacquire "+i.id)
	return nil
}

// waitStarted waits for the next instance start and returns its id.
func (w *world) waitStarted() string {
	w.t.Helper()
	select {
	case id := <-w.started:
		return id
	case <-time.After(10 * time.Second):
		w.t.Fatal("no instance started")
		return ""
	}
}

func (w *world) finish(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.release[id])
	w.release[id] = make(chan struct{}) // a later run of the same id waits again
}

func (w *world) startsOf(id string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.starts[id]
}

func (w *world) hasDoc(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.docs[id]
	return ok
}

func TestStepUpResumesEveryDocument(t *testing.T) {
	w := newWorld(t, "a", "b")
	w.node.set(true, 1)
	got := []string{w.waitStarted(), w.waitStarted()}
	slices.Sort(got)
	if fmt.Sprint(got) != "[a b]" {
		t.Fatalf("started %v, want a and b", got)
	}
	h, ok := w.svc.Lookup("a")
	if !ok {
		t.Fatal("a is not running")
	}
	w.finish("a")
	if err := h.Wait(context.Background()); err != nil {
		t.Fatalf("a: %v", err)
	}
	if w.hasDoc("a") || !w.hasDoc("b") {
		t.Fatal("a's document must be gone and b's still there")
	}
	if _, ok := w.svc.Lookup("a"); ok {
		t.Fatal("a still listed after it finished")
	}
}

func TestStepDownInterruptsAndNextTermResumes(t *testing.T) {
	w := newWorld(t, "b")
	w.node.set(true, 1)
	w.waitStarted()
	h, _ := w.svc.Lookup("b")
	w.node.set(false, 1)
	if err := h.Wait(context.Background()); !mongoerr.Is(err, mongoerr.InterruptedDueToReplStateChange) {
		t.Fatalf("interrupted instance answered %v, want InterruptedDueToReplStateChange", err)
	}
	if !w.hasDoc("b") {
		t.Fatal("the document of an interrupted instance must stay")
	}
	if _, err := w.svc.GetOrCreate(context.Background(), stateDoc("c", "x")); !mongoerr.Is(err, mongoerr.NotWritablePrimary) {
		t.Fatalf("GetOrCreate on a secondary: %v, want NotWritablePrimary", err)
	}
	w.node.set(true, 2)
	if id := w.waitStarted(); id != "b" || w.startsOf("b") != 2 {
		t.Fatalf("the new term started %s (b started %d times), want b resumed", id, w.startsOf("b"))
	}
	// A new term without a step-down in between (a missed one) also rebuilds.
	w.node.set(true, 3)
	if id := w.waitStarted(); id != "b" || w.startsOf("b") != 3 {
		t.Fatalf("term 3 started %s (b started %d times), want b resumed", id, w.startsOf("b"))
	}
}

func TestGetOrCreateJoinsOrConflicts(t *testing.T) {
	w := newWorld(t)
	w.node.set(true, 1)
	if err := w.svc.WaitRunning(context.Background()); err != nil {
		t.Fatal(err)
	}
	h1, err := w.svc.GetOrCreate(context.Background(), stateDoc("c", "x"))
	if err != nil {
		t.Fatal(err)
	}
	w.waitStarted()
	if !w.hasDoc("c") {
		t.Fatal("the state document must be persisted before the instance runs")
	}
	h2, err := w.svc.GetOrCreate(context.Background(), stateDoc("c", "x"))
	if err != nil || h2.e != h1.e {
		t.Fatalf("an identical request must join: %v", err)
	}
	if _, err := w.svc.GetOrCreate(context.Background(), stateDoc("c", "y")); !mongoerr.Is(err, mongoerr.ConflictingOperationInProgress) {
		t.Fatalf("a different request: %v, want ConflictingOperationInProgress", err)
	}
	w.finish("c")
	if err := h2.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := w.startsOf("c"); n != 1 {
		t.Fatalf("c ran %d times, want once", n)
	}
}

// A request that arrives while the service rebuilds waits, then joins the resumed
// instance instead of starting a second one for the same id.
func TestRequestsWaitForTheRebuild(t *testing.T) {
	w := newWorld(t, "d")
	w.mu.Lock()
	w.loadGate, w.loading = make(chan struct{}), make(chan struct{})
	gate, loading := w.loadGate, w.loading
	w.mu.Unlock()
	w.node.set(true, 1)
	<-loading
	type result struct {
		h   *Handle
		err error
	}
	res := make(chan result, 1)
	go func() {
		h, err := w.svc.GetOrCreate(context.Background(), stateDoc("d", "x"))
		res <- result{h, err}
	}()
	select {
	case r := <-res:
		t.Fatalf("GetOrCreate returned during the rebuild: %v", r.err)
	default:
	}
	close(gate)
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	w.waitStarted()
	if n := w.startsOf("d"); n != 1 {
		t.Fatalf("d started %d times, want once (the resumed instance, joined)", n)
	}
	w.finish("d")
	if err := r.h.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRunPhases(t *testing.T) {
	var ran, checkpoints []string
	phase := func(name string, fail bool) Phase {
		return Phase{Name: name, Run: func(context.Context) error {
			ran = append(ran, name)
			if fail {
				return errors.New("crash in " + name)
			}
			return nil
		}}
	}
	var saved string
	checkpoint := func(_ context.Context, name string) error {
		checkpoints = append(checkpoints, name)
		saved = name
		return nil
	}
	// A fresh instance checkpoints and runs every phase; a crash in the second leaves it
	// checkpointed.
	err := RunPhases(context.Background(), "", []Phase{phase("one", false), phase("two", true), phase("three", false)}, checkpoint)
	if err == nil || fmt.Sprint(ran) != "[one two]" || fmt.Sprint(checkpoints) != "[one two]" || saved != "two" {
		t.Fatalf("first run: err %v, ran %v, checkpoints %v", err, ran, checkpoints)
	}
	// Resumed: "one" is skipped, "two" redone without a new checkpoint, "three" checkpointed.
	ran, checkpoints = nil, nil
	err = RunPhases(context.Background(), saved, []Phase{phase("one", false), phase("two", false), phase("three", false)}, checkpoint)
	if err != nil || fmt.Sprint(ran) != "[two three]" || fmt.Sprint(checkpoints) != "[three]" {
		t.Fatalf("resumed run: err %v, ran %v, checkpoints %v", err, ran, checkpoints)
	}
	if err := RunPhases(context.Background(), "four", []Phase{phase("one", false)}, checkpoint); err == nil {
		t.Fatal("an unknown checkpointed phase must fail")
	}
	// A failed checkpoint does not run its phase.
	ran = nil
	err = RunPhases(context.Background(), "", []Phase{phase("one", false)}, func(context.Context, string) error { return errors.New("no majority") })
	if err == nil || len(ran) != 0 {
		t.Fatalf("failed checkpoint: err %v, ran %v", err, ran)
	}
}

// A resumed instance reacquires what it holds at the rebuild, before a new request that
// arrived during the rebuild is admitted (it could otherwise take the DDL locks first).
func TestResumedInstancesReacquireBeforeNewRequests(t *testing.T) {
	w := newWorld(t, "a")
	w.mu.Lock()
	w.docs["a"] = stateDoc("a", "reacquire")
	w.loadGate, w.loading = make(chan struct{}), make(chan struct{})
	gate, loading := w.loadGate, w.loading
	w.mu.Unlock()
	w.node.set(true, 1)
	<-loading
	created := make(chan error, 1)
	go func() {
		_, err := w.svc.GetOrCreate(context.Background(), stateDoc("n", "x"))
		created <- err
	}()
	close(gate)
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	events := slices.Clone(w.events)
	w.mu.Unlock()
	if fmt.Sprint(events) != "[reacquire a insert n]" {
		t.Fatalf("events %v, want a's reacquisition before n's insert", events)
	}
}

// A state document written by a request whose insert failed after the write (its majority
// wait) has no instance: the next request for its id adopts it as stored instead of failing
// with DuplicateKey until the next step-up; a request with other options conflicts with it.
func TestGetOrCreateAdoptsAnOrphanedDocument(t *testing.T) {
	w := newWorld(t)
	w.node.set(true, 1)
	if err := w.svc.WaitRunning(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.docs["o"] = stateDoc("o", "x") // written, but the request never saw it succeed
	w.mu.Unlock()
	if _, err := w.svc.GetOrCreate(context.Background(), stateDoc("o", "y")); !mongoerr.Is(err, mongoerr.ConflictingOperationInProgress) {
		t.Fatalf("a request with other options: %v, want ConflictingOperationInProgress", err)
	}
	if id := w.waitStarted(); id != "o" {
		t.Fatalf("started %s, want the adopted o", id)
	}
	h, err := w.svc.GetOrCreate(context.Background(), stateDoc("o", "x"))
	if err != nil {
		t.Fatalf("an identical request joins the adopted instance: %v", err)
	}
	w.finish("o")
	if err := h.Wait(context.Background()); err != nil || w.hasDoc("o") {
		t.Fatalf("the adopted instance ends and removes its document: %v", err)
	}
}

// TestANewTermIsNotRunningUntilRebuilt: a node elected again whose service has not followed
// it yet still runs the old term; requests wait for the new term's rebuild instead of
// joining instances about to be interrupted or missing those the primary in between
// persisted.
func TestANewTermIsNotRunningUntilRebuilt(t *testing.T) {
	w := newWorld(t)
	w.node.set(true, 1)
	if err := w.svc.WaitRunning(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.node.mu.Lock()
	w.node.term = 3 // elected again; the watcher has not been told yet
	w.node.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.svc.WaitRunning(ctx); err == nil {
		t.Fatal("WaitRunning: running in term 1 while the node is in term 3")
	}
	if _, err := w.svc.GetOrCreate(ctx, stateDoc("e", "x")); err == nil {
		t.Fatal("GetOrCreate: created an instance in term 1 while the node is in term 3")
	}
	w.node.set(true, 3)
	if err := w.svc.WaitRunning(context.Background()); err != nil {
		t.Fatal(err)
	}
}
