package initialsync_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/failpoint"
	"humongo/internal/repl/applier/repltest"
	"humongo/internal/repl/fetcher"
	"humongo/internal/repl/initialsync"
)

// applyOpsRound inserts 20 documents {_id: "r-i"} into app.ao, replaces the previous
// round's first 10 and deletes its last 10: one applyOps entry.
func applyOpsRound(r int) bson.D {
	ops := bson.A{}
	for i := range 20 {
		ops = append(ops, bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "app.ao"},
			{Key: "o", Value: bson.D{{Key: "_id", Value: fmt.Sprint(r, "-", i)}, {Key: "r", Value: r}}}})
	}
	for i := range 20 {
		if r == 0 {
			break
		}
		id := fmt.Sprint(r-1, "-", i)
		if i < 10 {
			ops = append(ops, bson.D{{Key: "op", Value: "u"}, {Key: "ns", Value: "app.ao"},
				{Key: "o", Value: bson.D{{Key: "$v", Value: 2}, {Key: "diff", Value: bson.D{{Key: "i", Value: bson.D{{Key: "next", Value: r}}}}}}},
				{Key: "o2", Value: bson.D{{Key: "_id", Value: id}}}})
		} else {
			ops = append(ops, bson.D{{Key: "op", Value: "d"}, {Key: "ns", Value: "app.ao"}, {Key: "o", Value: bson.D{{Key: "_id", Value: id}}}})
		}
	}
	return bson.D{{Key: "applyOps", Value: ops}}
}

// TestInitialSyncOverApplyOpsEntries: a new member initial-syncs from a primary whose oplog
// holds applyOps entries before and during the copy (written while the sync is held before
// cloning, so the clone already reflects them and the oplog application phase applies them
// again over it, in ModeInitialSync); it ends with the primary's data.
func TestInitialSyncOverApplyOpsEntries(t *testing.T) {
	p := repltest.StartPrimary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.Client.Database("app").CreateCollection(ctx, "ao"); err != nil {
		t.Fatal(err)
	}
	admin := p.Client.Database("admin")
	round := 0
	for ; round < 5; round++ {
		if err := admin.RunCommand(ctx, applyOpsRound(round)).Err(); err != nil {
			t.Fatal(err)
		}
	}

	fp := failpoint.Get("initialSyncHangBeforeCopyingDatabases")
	entered := fp.TimesEntered()
	fp.Configure(failpoint.AlwaysOn, 0, 0, nil)
	defer fp.Disable()
	m := repltest.StartMember(t)
	syncer := initialsync.New(initialsync.Config{Engine: m.DB.Engine, Catalog: m.DB.Catalog, Colls: m.DB.Colls,
		Writer: m.Writer, Chooser: fetcher.FixedSource{Host: p.Host}, AwaitTime: 100 * time.Millisecond, MaxAttempts: 1})
	done := make(chan error, 1)
	go func() {
		_, err := syncer.Run(ctx)
		done <- err
	}()
	if err := fp.WaitForTimesEntered(ctx, entered+1); err != nil {
		t.Fatal(err)
	}
	for ; round < 12; round++ {
		if err := admin.RunCommand(ctx, applyOpsRound(round)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	fp.Disable()
	if err := <-done; err != nil {
		t.Fatalf("initial sync: %v\nstatus: %v", err, syncer.Status())
	}
	repltest.Compare(t, p, m)
	n, err := m.Client.Database("local").Collection("oplog.rs").CountDocuments(ctx, bson.D{{Key: "o.applyOps", Value: bson.D{{Key: "$exists", Value: true}}}})
	if err != nil || n < 7 {
		t.Fatalf("the member's oplog holds %d applyOps entries (err %v), want at least the 7 written during the sync", n, err)
	}
	if got := repltest.DumpNode(t, m)["app.ao"].Docs; len(got) != 20+10*(round-1) {
		t.Fatalf("app.ao has %d documents, want %d", len(got), 20+10*(round-1))
	}
}
