package initialsync_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/optime"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/applier/repltest"
	"humongo/internal/repl/fetcher"
	"humongo/internal/repl/initialsync"
)

func startReplication(t *testing.T, m *repltest.Node, source string) *applier.Replication {
	t.Helper()
	r, err := applier.Start(context.Background(), applier.Deps{Engine: m.DB.Engine, Catalog: m.DB.Catalog, Colls: m.DB.Colls,
		Writer: m.Writer, Chooser: fetcher.FixedSource{Host: source}, AwaitTime: 100 * time.Millisecond,
		Fatal: func(err error) { t.Errorf("fatal apply error: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

func waitCaughtUp(t *testing.T, p *repltest.Node, r *applier.Replication) {
	t.Helper()
	top := repltest.TopOfOplog(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Applier().WaitApplied(ctx, optime.MakeTimestamp(top.T, top.I)); err != nil {
		t.Fatalf("member did not apply up to %v (lastApplied %v): %v", top, r.LastApplied(), err)
	}
}

// TestInitialSyncWhileWriting: a primary with data and a steady-state secondary; a third,
// empty member initial-syncs from the primary while writes continue, then replicates in
// steady state; all three end with identical data and indexes.
func TestInitialSyncWhileWriting(t *testing.T) {
	p := repltest.StartPrimary(t)
	sec := repltest.StartMember(t)
	rs := startReplication(t, sec, p.Host)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for round := range 3 {
		if err := repltest.Workload(ctx, p.Client, round, 60); err != nil {
			t.Fatal(err)
		}
	}
	// A unique index and a bulk of documents so the clone takes several batches.
	big := p.Client.Database("app").Collection("big")
	docs := make([]any, 0, 3000)
	for i := range 3000 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "u", Value: i}, {Key: "pad", Value: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}})
	}
	if _, err := big.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if err := big.Database().RunCommand(ctx, bson.D{{Key: "createIndexes", Value: "big"},
		{Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "u", Value: 1}}}, {Key: "name", Value: "u_1"}, {Key: "unique", Value: true}}}}}).Err(); err != nil {
		t.Fatal(err)
	}

	// Writes continue during the initial sync.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var werr error
	rounds := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for round := 10; !stop.Load(); round++ { // k from 300: disjoint from the rounds above
			if err := repltest.Workload(ctx, p.Client, round, 30); err != nil {
				werr = err
				return
			}
			// Updates that move unique keys around in the collection being cloned.
			if _, err := big.UpdateMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: 50}}}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "u", Value: 100000}}}}); err != nil {
				werr = err
				return
			}
			rounds++
		}
	}()

	m := repltest.StartMember(t)
	syncer := initialsync.New(initialsync.Config{Engine: m.DB.Engine, Catalog: m.DB.Catalog, Colls: m.DB.Colls,
		Writer: m.Writer, Chooser: fetcher.FixedSource{Host: p.Host}, AwaitTime: 100 * time.Millisecond, CloneBatch: 200})
	start := time.Now()
	op, err := syncer.Run(ctx)
	if err != nil {
		t.Fatalf("initial sync: %v\nstatus: %v", err, syncer.Status())
	}
	t.Logf("initial sync done at %v in %v; status %v", op, time.Since(start), syncer.Status())
	st := syncer.Status()
	if n, _ := st.Lookup("databases", "databasesCloned").Int32OK(); n < 2 {
		t.Errorf("initialSyncStatus: %v", st)
	}

	// The member continues in steady state from its own oplog.
	rm := startReplication(t, m, p.Host)
	time.Sleep(300 * time.Millisecond) // let more writes land after the switch
	stop.Store(true)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	t.Logf("%d write rounds ran during and after initial sync", rounds)
	waitCaughtUp(t, p, rm)
	waitCaughtUp(t, p, rs)
	repltest.Compare(t, p, m)
	repltest.Compare(t, p, sec)
}
