package txncoord

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// memStore is a Store in memory.
type memStore struct {
	mu   sync.Mutex
	docs map[string]Doc
	log  []string
}

func newMemStore() *memStore { return &memStore{docs: map[string]Doc{}} }

func (m *memStore) WriteParticipants(_ context.Context, d *Doc) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.docs[d.key()]; ok && old.Decision != nil {
		return mongoerr.New(mongoerr.DuplicateKey, "E11000 duplicate key")
	}
	c := *d
	c.Decision = nil
	m.docs[d.key()] = c
	m.log = append(m.log, "participants")
	return nil
}

func (m *memStore) WriteDecision(_ context.Context, d *Doc) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.docs[d.key()]; !ok {
		return mongoerr.New(mongoerr.NoSuchTransaction, "gone")
	}
	m.docs[d.key()] = *d
	m.log = append(m.log, "decision")
	return nil
}

func (m *memStore) Delete(_ context.Context, d *Doc) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.docs, d.key())
	m.log = append(m.log, "delete")
	return nil
}

func (m *memStore) List(context.Context) ([]*Doc, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Doc
	for _, d := range m.docs {
		c := d
		out = append(out, &c)
	}
	return out, nil
}

func (m *memStore) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.docs)
}

// fakeShards answers the participants' commands: prepare gives each shard's timestamp or
// error; commit/abort are recorded.
type fakeShards struct {
	mu       sync.Mutex
	prepare  map[string]func() (bson.Timestamp, error)
	decided  map[string]error // a shard's answer to commitTransaction and abortTransaction (nil: ok)
	received map[string][]bsoncore.Document
	block    chan struct{} // non-nil: every send waits for it (or ctx)
}

func (f *fakeShards) send(ctx context.Context, shard string, cmd bsoncore.Document) (bsoncore.Document, error) {
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	if f.received == nil {
		f.received = map[string][]bsoncore.Document{}
	}
	f.received[shard] = append(f.received[shard], cmd)
	p := f.prepare[shard]
	decidedErr := f.decided[shard]
	f.mu.Unlock()
	if cmd.Index(0).Key() == "prepareTransaction" {
		ts, err := p()
		if err != nil {
			return nil, err
		}
		return bsoncore.NewDocumentBuilder().AppendTimestamp("prepareTimestamp", ts.T, ts.I).Build(), nil
	}
	if decidedErr != nil {
		return nil, decidedErr
	}
	return bsoncore.NewDocumentBuilder().Build(), nil
}

func (f *fakeShards) last(shard string) bsoncore.Document {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.received[shard]
	if len(r) == 0 {
		return nil
	}
	return r[len(r)-1]
}

var testLsid = bsoncore.NewDocumentBuilder().AppendBinary("id", 4, make([]byte, 16)).Build()

func startService(t *testing.T, store Store, f *fakeShards) *Service {
	t.Helper()
	s := NewService(store, f.send, nil)
	if err := s.StepUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func waitDrained(t *testing.T, m *memStore) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for m.count() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("coordinator documents left: %d", m.count())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ts(t uint32) func() (bson.Timestamp, error) {
	return func() (bson.Timestamp, error) { return bson.Timestamp{T: t, I: 1}, nil }
}

func TestCommitAtLargestPrepareTimestamp(t *testing.T) {
	m := newMemStore()
	f := &fakeShards{prepare: map[string]func() (bson.Timestamp, error){"s0": ts(5), "s1": ts(7)}}
	s := startService(t, m, f)
	d, err := s.Coordinate(context.Background(), testLsid, 3, []string{"s0", "s1"}, nil)
	if err != nil || !d.Commit || d.CommitTimestamp != (bson.Timestamp{T: 7, I: 1}) {
		t.Fatalf("decision %+v, %v", d, err)
	}
	waitDrained(t, m)
	for _, sh := range []string{"s0", "s1"} {
		c := f.last(sh)
		if c.Index(0).Key() != "commitTransaction" {
			t.Fatalf("%s got %s last", sh, c)
		}
		if tt, i, _ := c.Lookup("commitTimestamp").TimestampOK(); tt != 7 || i != 1 {
			t.Fatalf("%s committed at %d,%d", sh, tt, i)
		}
		if n, _ := c.Lookup("txnNumber").AsInt64OK(); n != 3 {
			t.Fatalf("%s txnNumber %d", sh, n)
		}
	}
	if got := m.log; len(got) != 3 || got[0] != "participants" || got[1] != "decision" || got[2] != "delete" {
		t.Fatalf("store steps %v", got)
	}
	if s.Stats.SuccessfulTwoPhaseCommit.Load() != 1 {
		t.Fatal("commit not counted")
	}
}

func TestAbortOnRefusal(t *testing.T) {
	m := newMemStore()
	f := &fakeShards{prepare: map[string]func() (bson.Timestamp, error){"s0": ts(5), "s1": func() (bson.Timestamp, error) {
		return bson.Timestamp{}, mongoerr.New(mongoerr.NoSuchTransaction, "Given transaction number 3 does not match any in-progress transactions.")
	}}}
	s := startService(t, m, f)
	d, err := s.Coordinate(context.Background(), testLsid, 3, []string{"s0", "s1"}, nil)
	if err != nil || d.Commit || !mongoerr.Is(d.Err(), mongoerr.NoSuchTransaction) {
		t.Fatalf("decision %+v, %v", d, err)
	}
	waitDrained(t, m)
	for _, sh := range []string{"s0", "s1"} {
		if c := f.last(sh); c.Index(0).Key() != "abortTransaction" {
			t.Fatalf("%s got %s last", sh, c)
		}
	}
}

func TestRetriesNetworkErrors(t *testing.T) {
	m := newMemStore()
	fails := 3
	f := &fakeShards{prepare: map[string]func() (bson.Timestamp, error){"s0": ts(5), "s1": func() (bson.Timestamp, error) {
		switch fails--; fails {
		case 2:
			return bson.Timestamp{}, errors.New("connection reset")
		case 1:
			// A primary killed mid-request: the driver's CommandError of code 0 with the
			// NetworkError label, wrapped in a mongoerr (as ddl.RemoteError did before it
			// passed network errors on unwrapped).
			ce := mongo.CommandError{Code: 0, Message: "connection(127.0.0.1:1[-21]) incomplete read of message header: EOF",
				Labels: []string{"NetworkError"}}
			e := mongoerr.New(mongoerr.Code(ce.Code), ce.Message)
			e.Err = ce
			return bson.Timestamp{}, e
		case 0:
			return bson.Timestamp{}, mongoerr.New(mongoerr.InterruptedDueToReplStateChange, "stepping down")
		}
		return bson.Timestamp{T: 9, I: 1}, nil
	}}}
	s := startService(t, m, f)
	d, err := s.Coordinate(context.Background(), testLsid, 1, []string{"s0", "s1"}, nil)
	if err != nil || !d.Commit || d.CommitTimestamp.T != 9 {
		t.Fatalf("decision %+v, %v", d, err)
	}
}

func TestResumeAtPersistedStep(t *testing.T) {
	m := newMemStore()
	decided := Doc{Lsid: testLsid, TxnNumber: 1, Participants: []string{"s0", "s1"},
		Decision: &Decision{Commit: true, CommitTimestamp: bson.Timestamp{T: 4, I: 2}}}
	undecided := Doc{Lsid: testLsid, TxnNumber: 2, Participants: []string{"s0", "s1"}}
	m.docs[decided.key()], m.docs[undecided.key()] = decided, undecided
	f := &fakeShards{prepare: map[string]func() (bson.Timestamp, error){"s0": ts(5), "s1": ts(6)}}
	startService(t, m, f)
	waitDrained(t, m)
	f.mu.Lock()
	defer f.mu.Unlock()
	var commits, prepares int
	for _, cmds := range f.received {
		for _, c := range cmds {
			n, _ := c.Lookup("txnNumber").AsInt64OK()
			switch c.Index(0).Key() {
			case "prepareTransaction":
				prepares++
				if n != 2 {
					t.Fatalf("a decided coordinator prepared again: %s", c)
				}
			case "commitTransaction":
				commits++
				tt, _, _ := c.Lookup("commitTimestamp").TimestampOK()
				if (n == 1 && tt != 4) || (n == 2 && tt != 6) {
					t.Fatalf("commit at the wrong timestamp: %s", c)
				}
			}
		}
	}
	if commits != 4 || prepares != 2 {
		t.Fatalf("commits %d prepares %d", commits, prepares)
	}
}

// TestResumedCommitAcknowledgedByTooOld: a coordinator resumed with a commit decision whose
// previous primary delivered it before dying finds the participant moved on to a newer
// transaction (TransactionTooOld) or without it (NoSuchTransaction): that acknowledges the
// commit, and the document drains (it was left forever, blocking nothing but the drain).
// ShardNotFound acknowledges an abort only.
func TestResumedCommitAcknowledgedByTooOld(t *testing.T) {
	m := newMemStore()
	d := Doc{Lsid: testLsid, TxnNumber: 37, Participants: []string{"s0", "s1"},
		Decision: &Decision{Commit: true, CommitTimestamp: bson.Timestamp{T: 4, I: 2}}}
	m.docs[d.key()] = d
	f := &fakeShards{decided: map[string]error{
		"s0": mongoerr.New(mongoerr.NoSuchTransaction, "Transaction with { txnNumber: 37 } has been aborted."),
		"s1": mongoerr.New(mongoerr.TransactionTooOld, "txnNumber 37 is less than last txnNumber 251 seen in session"),
	}}
	startService(t, m, f)
	waitDrained(t, m)
	for _, c := range []struct {
		err    error
		commit bool
		want   bool
	}{
		{mongoerr.New(mongoerr.ShardNotFound, "no shard s9"), false, true},
		{mongoerr.New(mongoerr.ShardNotFound, "no shard s9"), true, false},
		{mongoerr.New(mongoerr.InterruptedDueToReplStateChange, "stepping down"), true, false},
		{mongoerr.New(mongoerr.TransactionTooOld, "too old"), false, true},
	} {
		if got := decisionAcknowledged(c.err, c.commit); got != c.want {
			t.Errorf("decisionAcknowledged(%v, commit %v) = %v", c.err, c.commit, got)
		}
	}
}

func TestStepDownInterrupts(t *testing.T) {
	m := newMemStore()
	f := &fakeShards{prepare: map[string]func() (bson.Timestamp, error){"s0": ts(5)}, block: make(chan struct{})}
	s := startService(t, m, f)
	errc := make(chan error, 1)
	go func() {
		_, err := s.Coordinate(context.Background(), testLsid, 1, []string{"s0"}, nil)
		errc <- err
	}()
	for m.count() == 0 {
		time.Sleep(time.Millisecond)
	}
	s.StepDown()
	if err := <-errc; !mongoerr.Is(err, mongoerr.InterruptedDueToReplStateChange) {
		t.Fatalf("got %v", err)
	}
	if m.count() != 1 {
		t.Fatal("the document must stay for the next primary")
	}
	// The next term resumes it.
	close(f.block)
	if err := s.StepUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	d, found, err := s.Recover(context.Background(), testLsid, 1)
	if err != nil {
		t.Fatal(err)
	}
	if found && !d.Commit {
		t.Fatalf("decision %+v", d)
	}
	waitDrained(t, m)
}

func TestDocRoundTrip(t *testing.T) {
	for _, d := range []Doc{
		{Lsid: testLsid, TxnNumber: 4, Participants: []string{"a", "b"}},
		{Lsid: testLsid, TxnNumber: 4, Participants: []string{"a"}, Decision: &Decision{Commit: true, CommitTimestamp: bson.Timestamp{T: 1, I: 2}}},
		{Lsid: testLsid, TxnNumber: 4, Participants: []string{"a"}, Decision: &Decision{AbortStatus: mongoerr.New(mongoerr.NoSuchTransaction, "x")}},
	} {
		got, err := ParseDoc(d.Document())
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Document()) != string(d.Document()) {
			t.Fatalf("round trip %s -> %s", d.Document(), got.Document())
		}
	}
}

// A transaction the admission finds decided is answered without a new coordination: a
// second coordinator would find the participants committed and decide abort.
func TestAdmitAnswersDecidedTransactions(t *testing.T) {
	m := newMemStore()
	f := &fakeShards{prepare: map[string]func() (bson.Timestamp, error){"s0": ts(5)}}
	s := startService(t, m, f)
	d, err := s.Coordinate(context.Background(), testLsid, 1, []string{"s0"}, func(context.Context) (bool, error) { return true, nil })
	if err != nil || !d.Commit {
		t.Fatalf("committed: %+v, %v", d, err)
	}
	_, err = s.Coordinate(context.Background(), testLsid, 2, []string{"s0"}, func(context.Context) (bool, error) {
		return true, mongoerr.New(mongoerr.NoSuchTransaction, "Transaction was aborted")
	})
	if !mongoerr.Is(err, mongoerr.NoSuchTransaction) {
		t.Fatalf("aborted: %v", err)
	}
	if len(m.log) != 0 || f.last("s0") != nil || s.Stats.Created.Load() != 0 {
		t.Fatalf("a decided transaction was coordinated again: store %v", m.log)
	}
}

// termNode is a replication coordinator whose term the test moves, telling watchers only
// when it says so.
type termNode struct {
	mu      sync.Mutex
	changed chan struct{}
	term    int64
}

func (n *termNode) TopologyVersion() (int64, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return 0, n.changed
}
func (n *termNode) IsWritablePrimary() bool { return true }
func (n *termNode) Term() int64             { n.mu.Lock(); defer n.mu.Unlock(); return n.term }
func (n *termNode) setTerm(t int64)         { n.mu.Lock(); defer n.mu.Unlock(); n.term = t }
func (n *termNode) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.changed)
	n.changed = make(chan struct{})
}

// TestRecoverWaitsForTheNodesTerm: a node elected again (term 1, then 3) whose service has
// not yet followed it still runs term 1, without the coordinator term 2's primary persisted
// and that this node now holds. A commit retried through another router (Recover) must wait
// for the service to resume term 3; answering from term 1 it finds no coordinator, and the
// shard takes its prepared participant for an orphan (Location51021).
func TestRecoverWaitsForTheNodesTerm(t *testing.T) {
	// The participants never answer: the resumed coordinator stays until the test ends.
	store, f := newMemStore(), &fakeShards{block: make(chan struct{})}
	node := &termNode{changed: make(chan struct{}), term: 1}
	s := NewService(store, f.send, nil)
	stop := s.Watch(node)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, found, err := s.Recover(ctx, testLsid, 1); err != nil || found {
		t.Fatalf("Recover in term 1: found %v, %v", found, err)
	}

	// Term 2's primary coordinated txnNumber 2 and decided commit; this node replicated it.
	store.mu.Lock()
	d := Doc{Lsid: testLsid, TxnNumber: 2, Participants: []string{"s0"}, Decision: &Decision{Commit: true, CommitTimestamp: bson.Timestamp{T: 5, I: 1}}}
	store.docs[d.key()] = d
	store.mu.Unlock()
	node.setTerm(3)

	type result struct {
		d     Decision
		found bool
		err   error
	}
	done := make(chan result, 1)
	go func() {
		d, found, err := s.Recover(ctx, testLsid, 2)
		done <- result{d, found, err}
	}()
	node.notify()
	r := <-done
	if r.err != nil || !r.found || !r.d.Commit {
		t.Fatalf("Recover in term 3: %+v, want the resumed coordinator's commit", r)
	}
}
