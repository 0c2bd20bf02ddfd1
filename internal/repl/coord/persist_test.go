package coord_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/repl/coord"
	"humongo/internal/repl/topology"
)

// blockingStore is a memStore whose journaled writes of local.replset.election wait until
// release is closed; entered receives once per such write.
type blockingStore struct {
	memStore
	entered chan struct{}
	release chan struct{}
}

func (s *blockingStore) Save(ctx context.Context, ns string, doc bsoncore.Document, durable bool) error {
	if ns == coord.ElectionNS {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.memStore.Save(ctx, ns, doc, durable)
}

// TestVoteIsDurableBeforeTheReplyWithoutHoldingTheMutex: a granted vote is answered only once
// local.replset.election holds it, and the coordinator stays responsive while the journal
// write is in progress (it happens outside c.mu; with the write under the mutex, Hello
// would wait for the disk).
func TestVoteIsDurableBeforeTheReplyWithoutHoldingTheMutex(t *testing.T) {
	self := "127.0.0.1:1"
	cfg := topology.NewDefaultConfig("rs0", self, "127.0.0.1:2", "127.0.0.1:3")
	store := &blockingStore{memStore: memStore{docs: map[string]bsoncore.Document{coord.ConfigNS: coord.ConfigDocument(cfg)}},
		entered: make(chan struct{}, 1), release: make(chan struct{})}
	// A clock that never moves: no tick, so no heartbeat or election of this node's own.
	rc := coord.New(coord.Options{SetName: "rs0", Self: self, Store: store, Clock: newFakeClock()})
	if err := rc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	defer func() {
		select {
		case <-store.release:
		default:
			close(store.release)
		}
	}()
	cur, err := rc.Config()
	if err != nil {
		t.Fatal(err)
	}
	ver, _ := cur.Lookup("version").AsInt64OK()
	cterm, ok := cur.Lookup("term").AsInt64OK()
	if !ok {
		cterm = -1
	}
	req := bsoncore.NewDocumentBuilder().AppendInt32("replSetRequestVotes", 1).AppendString("setName", "rs0").
		AppendBoolean("dryRun", false).AppendInt64("term", 1).AppendInt32("candidateIndex", 1).
		AppendInt64("configVersion", ver).AppendInt64("configTerm", cterm).
		AppendDocument("lastAppliedOpTime", bsoncore.NewDocumentBuilder().AppendTimestamp("ts", 1, 1).AppendInt64("t", 0).Build()).
		Build()

	type result struct {
		reply bsoncore.Document
		err   error
	}
	done := make(chan result, 1)
	go func() {
		reply, err := rc.ProcessRequestVotes(req)
		done <- result{reply, err}
	}()
	select {
	case <-store.entered:
	case r := <-done:
		t.Fatalf("answered without writing the vote: %v %v", r.reply, r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("the vote was never written")
	}
	hello := make(chan struct{})
	go func() {
		_ = rc.Hello()
		close(hello)
	}()
	select {
	case <-hello:
	case <-time.After(5 * time.Second):
		t.Fatal("Hello waited for the vote's journal write: the coordinator mutex is held across it")
	}
	select {
	case r := <-done:
		t.Fatalf("answered before the vote was durable: %v %v", r.reply, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	close(store.release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if g, _ := r.reply.Lookup("voteGranted").BooleanOK(); !g {
		t.Fatalf("vote not granted: %v", r.reply)
	}
	doc, _ := store.Load(context.Background(), coord.ElectionNS)
	if vt, _ := doc.Lookup("voteTerm").AsInt64OK(); vt != 1 {
		t.Fatalf("persisted %v, want the vote of term 1", doc)
	}
	if rc.Term() != 1 {
		t.Fatalf("term %d, want 1", rc.Term())
	}
}
