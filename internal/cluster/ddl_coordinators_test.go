package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Issue 14's DDL coordinators through the router on real shards (the primary shard's
// shardCollection, renameCollection and dropDatabase coordinators): what each does and
// refuses, a conflicting request (117), and then each killed (kill -9 of the primary shard's
// primary) at its fail points: the restarted primary resumes it, the operation happens
// exactly once, and afterwards every shard's listCollections UUIDs equal config.collections.
func TestShardedDDLCoordinators(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{Args: []string{"--setParameter", "enableTestCommands=1"}})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	admin := d.Client.Database("admin")
	run := func(t *testing.T, db string, cmd bson.D) {
		t.Helper()
		if err := d.Client.Database(db).RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	wantCode := func(t *testing.T, what string, err error, code int32) {
		t.Helper()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != code {
			t.Fatalf("%s: %v, want code %d", what, err, code)
		}
	}
	s0, s1 := d.Shards[0].Topology.Name, d.Shards[1].Topology.Name
	run(t, "admin", bson.D{{Key: "enableSharding", Value: "ren"}, {Key: "primaryShard", Value: s0}})
	run(t, "admin", bson.D{{Key: "enableSharding", Value: "other"}, {Key: "primaryShard", Value: s1}})
	// shardTwo makes ns sharded on k with n documents over both shards.
	shardTwo := func(t *testing.T, ns string, n int) {
		t.Helper()
		run(t, "admin", bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}})
		db, coll := splitNS(ns)
		docs := make([]any, n)
		for i := range docs {
			docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}}
		}
		if _, err := d.Client.Database(db).Collection(coll).InsertMany(ctx, docs); err != nil {
			t.Fatal(err)
		}
		run(t, "admin", bson.D{{Key: "split", Value: ns}, {Key: "middle", Value: bson.D{{Key: "k", Value: n / 2}}}})
		run(t, "admin", bson.D{{Key: "moveChunk", Value: ns}, {Key: "find", Value: bson.D{{Key: "k", Value: n}}}, {Key: "to", Value: s1}})
	}
	count := func(t *testing.T, ns string) int64 {
		t.Helper()
		db, coll := splitNS(ns)
		n, err := d.Client.Database(db).Collection(coll).CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatalf("count %s: %v", ns, err)
		}
		return n
	}

	t.Run("rename", func(t *testing.T) {
		// Unsharded, within the database.
		if _, err := d.Client.Database("ren").Collection("u").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
			t.Fatal(err)
		}
		run(t, "admin", bson.D{{Key: "renameCollection", Value: "ren.u"}, {Key: "to", Value: "ren.u2"}})
		if count(t, "ren.u2") != 1 || count(t, "ren.u") != 0 {
			t.Fatal("the unsharded rename moved nothing")
		}
		// Sharded, with chunks on both shards: the data stays where it is, under the new name.
		shardTwo(t, "ren.s", 100)
		before := configUUID(ctx, t, d, "ren.s")
		run(t, "admin", bson.D{{Key: "renameCollection", Value: "ren.s"}, {Key: "to", Value: "ren.s2"}})
		if got := count(t, "ren.s2"); got != 100 {
			t.Fatalf("ren.s2 counts %d after the rename, want 100", got)
		}
		if after := configUUID(ctx, t, d, "ren.s2"); !bytesEqual(after.Data, before.Data) {
			t.Fatalf("the renamed collection's config UUID %v, want the source's %v", after, before)
		}
		if n, _ := d.Config.Client.Database("config").Collection("collections").CountDocuments(ctx, bson.D{{Key: "_id", Value: "ren.s"}}); n != 0 {
			t.Fatal("config.collections still has ren.s")
		}
		// Writes route by the new name's chunks.
		if _, err := d.Client.Database("ren").Collection("s2").InsertOne(ctx, bson.D{{Key: "_id", Value: 1000}, {Key: "k", Value: 1000}}); err != nil {
			t.Fatal(err)
		}
		if n, _ := d.Shards[1].Client.Database("ren").Collection("s2").CountDocuments(ctx, bson.D{{Key: "_id", Value: 1000}}); n != 1 {
			t.Fatal("a write to the renamed collection did not reach the owner of its chunk")
		}
		// Refusals, nothing changed.
		shardTwo(t, "ren.t", 10)
		wantCode(t, "sharded rename across databases",
			admin.RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "ren.t"}, {Key: "to", Value: "other.t"}}).Err(), 125)
		wantCode(t, "rename onto a sharded collection without dropTarget",
			admin.RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "ren.u2"}, {Key: "to", Value: "ren.t"}}).Err(), 48)
		wantCode(t, "rename of a missing collection",
			admin.RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "ren.nothing"}, {Key: "to", Value: "ren.t9"}}).Err(), 26)
		wantCode(t, "unsharded rename across primary shards",
			admin.RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "ren.u2"}, {Key: "to", Value: "other.u"}}).Err(), 125)
		if count(t, "ren.t") != 10 || count(t, "ren.u2") != 1 {
			t.Fatal("a refused rename changed data")
		}
		// An unsharded collection onto a sharded one with dropTarget: the target's metadata goes.
		run(t, "admin", bson.D{{Key: "renameCollection", Value: "ren.u2"}, {Key: "to", Value: "ren.t"}, {Key: "dropTarget", Value: true}})
		if n, _ := d.Config.Client.Database("config").Collection("collections").CountDocuments(ctx, bson.D{{Key: "_id", Value: "ren.t"}}); n != 0 {
			t.Fatal("the dropped sharded target keeps its config.collections entry")
		}
		if got := count(t, "ren.t"); got != 1 {
			t.Fatalf("ren.t counts %d, want the renamed source's 1", got)
		}
		checkUUIDs(ctx, t, d, "ren")
	})

	t.Run("refineCollectionShardKey", func(t *testing.T) {
		run(t, "admin", bson.D{{Key: "shardCollection", Value: "ren.f"}, {Key: "key", Value: bson.D{{Key: "a", Value: 1}}}})
		f := d.Client.Database("ren").Collection("f")
		docs := make([]any, 40)
		for i := range docs {
			docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i}, {Key: "b", Value: i % 3}}
		}
		if _, err := f.InsertMany(ctx, docs); err != nil {
			t.Fatal(err)
		}
		run(t, "admin", bson.D{{Key: "split", Value: "ren.f"}, {Key: "middle", Value: bson.D{{Key: "a", Value: 20}}}})
		run(t, "admin", bson.D{{Key: "moveChunk", Value: "ren.f"}, {Key: "find", Value: bson.D{{Key: "a", Value: 30}}}, {Key: "to", Value: s1}})
		refine := func(key bson.D) error {
			return admin.RunCommand(ctx, bson.D{{Key: "refineCollectionShardKey", Value: "ren.f"}, {Key: "key", Value: key}}).Err()
		}
		wantCode(t, "a key that does not extend", refine(bson.D{{Key: "b", Value: 1}, {Key: "a", Value: 1}}), 72)
		if err := refine(bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}); err == nil {
			t.Fatal("refined without an index on the new key")
		}
		wantCode(t, "an unsharded namespace",
			admin.RunCommand(ctx, bson.D{{Key: "refineCollectionShardKey", Value: "ren.t"}, {Key: "key", Value: bson.D{{Key: "x", Value: 1}}}}).Err(), 118)
		if _, err := f.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}}); err != nil {
			t.Fatal(err)
		}
		uuid := configUUID(ctx, t, d, "ren.f")
		if err := refine(bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}); err != nil {
			t.Fatal(err)
		}
		var entry struct {
			Key  bson.D      `bson:"key"`
			UUID bson.Binary `bson:"uuid"`
		}
		if err := d.Config.Client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: "ren.f"}}).Decode(&entry); err != nil {
			t.Fatal(err)
		}
		if len(entry.Key) != 2 || !bytesEqual(entry.UUID.Data, uuid.Data) {
			t.Fatalf("config.collections after the refine: %+v", entry)
		}
		cur, err := d.Config.Client.Database("config").Collection("chunks").Find(ctx, bson.D{{Key: "uuid", Value: uuid}})
		if err != nil {
			t.Fatal(err)
		}
		var chunks []struct {
			Min bson.D `bson:"min"`
			Max bson.D `bson:"max"`
		}
		if err := cur.All(ctx, &chunks); err != nil {
			t.Fatal(err)
		}
		for _, ch := range chunks {
			if len(ch.Min) != 2 || len(ch.Max) != 2 || ch.Min[1].Key != "b" {
				t.Fatalf("a chunk's bounds after the refine: %+v", ch)
			}
		}
		if n := count(t, "ren.f"); n != 40 {
			t.Fatalf("ren.f counts %d after the refine, want 40", n)
		}
		// Writes route by the refined key, a document without the new field too (null).
		if _, err := f.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 100}, {Key: "a", Value: 35}, {Key: "b", Value: 1}}, bson.D{{Key: "_id", Value: 101}, {Key: "a", Value: 36}}}); err != nil {
			t.Fatal(err)
		}
		if n, _ := d.Shards[1].Client.Database("ren").Collection("f").CountDocuments(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{100, 101}}}}}); n != 2 {
			t.Fatalf("writes after the refine reached the chunk's owner %d times, want 2", n)
		}
		if err := refine(bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}); err != nil {
			t.Fatalf("a repeated refine: %v", err)
		}
	})

	t.Run("conflict", func(t *testing.T) {
		// A shardCollection with another key while one is running: 117.
		direct := d.Shards[0].Client.Database("admin")
		fp := "hangCreateCollectionCoordinatorBeforeCommit"
		base := setFailPoint(ctx, t, direct, fp, "alwaysOn")
		done := make(chan error, 1)
		go func() {
			done <- admin.RunCommand(ctx, bson.D{{Key: "shardCollection", Value: "ren.c"}, {Key: "key", Value: bson.D{{Key: "a", Value: 1}}}}).Err()
		}()
		waitFailPoint(ctx, t, direct, fp, base, done)
		wantCode(t, "a conflicting shardCollection",
			admin.RunCommand(ctx, bson.D{{Key: "shardCollection", Value: "ren.c"}, {Key: "key", Value: bson.D{{Key: "b", Value: 1}}}}).Err(), 117)
		setFailPoint(ctx, t, direct, fp, "off")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})

	t.Run("dropDatabase", func(t *testing.T) {
		run(t, "admin", bson.D{{Key: "enableSharding", Value: "gone"}, {Key: "primaryShard", Value: s0}})
		shardTwo(t, "gone.s", 50)
		uuid := configUUID(ctx, t, d, "gone.s")
		if err := d.Client.Database("gone").Drop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := droppedDatabaseCheck(ctx, d, "gone", uuid); err != nil {
			t.Fatal(err)
		}
	})

	// Kill -9 the primary shard's primary at each coordinator's fail point.
	kills := []struct {
		name, failPoint string
		setup           func(t *testing.T)
		op              func() error
		// retried answers whether err, from the operation run again after the failover,
		// says it happened (once) already.
		retried func(err error) bool
		check   func(t *testing.T)
		// atFailPoint, when set, checks the state while the coordinator hangs.
		atFailPoint func(t *testing.T)
	}{
		{
			name: "shardCollection", failPoint: "hangCreateCollectionCoordinatorBeforeCommit",
			setup: func(t *testing.T) {
				if _, err := d.Client.Database("ren").Collection("k1").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 1}}); err != nil {
					t.Fatal(err)
				}
				if _, err := d.Client.Database("ren").Collection("k1").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}}); err != nil {
					t.Fatal(err)
				}
			},
			op: func() error {
				return admin.RunCommand(ctx, bson.D{{Key: "shardCollection", Value: "ren.k1"}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}}).Err()
			},
			retried: func(err error) bool { return err == nil },
			check: func(t *testing.T) {
				configUUID(ctx, t, d, "ren.k1")
				if count(t, "ren.k1") != 1 {
					t.Fatal("ren.k1 lost its document")
				}
			},
		},
		{
			name: "renameBeforeRename", failPoint: "hangRenameCollectionBeforeRename",
			setup: func(t *testing.T) { shardTwo(t, "ren.r1", 60) },
			op: func() error {
				return admin.RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "ren.r1"}, {Key: "to", Value: "ren.r1b"}}).Err()
			},
			retried: isCode(26),
			check: func(t *testing.T) {
				if count(t, "ren.r1b") != 60 || count(t, "ren.r1") != 0 {
					t.Fatal("the resumed rename lost or left documents")
				}
			},
		},
		{
			name: "renameAfterParticipants", failPoint: "hangRenameCollectionAfterParticipantsRenamed",
			setup: func(t *testing.T) { shardTwo(t, "ren.r2", 60) },
			op: func() error {
				return admin.RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "ren.r2"}, {Key: "to", Value: "ren.r2b"}}).Err()
			},
			retried: isCode(26),
			// The participants' critical sections are persisted: a restarted shard blocks
			// both namespaces again until the resumed coordinator releases them.
			atFailPoint: func(t *testing.T) {
				for _, sh := range d.Shards {
					if n, err := sh.Client.Database("config").Collection("collection_critical_sections").CountDocuments(ctx, bson.D{}); err != nil || n != 2 {
						t.Fatalf("%s has %d persisted critical sections (%v), want 2", sh.Topology.Name, n, err)
					}
				}
			},
			check: func(t *testing.T) {
				if count(t, "ren.r2b") != 60 || count(t, "ren.r2") != 0 {
					t.Fatal("the resumed rename lost or left documents")
				}
			},
		},
		{
			name: "dropDatabase", failPoint: "hangDropDatabaseCoordinatorBeforeDrop",
			setup: func(t *testing.T) {
				run(t, "admin", bson.D{{Key: "enableSharding", Value: "gone2"}, {Key: "primaryShard", Value: s0}})
				shardTwo(t, "gone2.s", 40)
			},
			op:      func() error { return d.Client.Database("gone2").Drop(ctx) },
			retried: func(err error) bool { return err == nil },
			check: func(t *testing.T) {
				if err := droppedDatabaseCheck(ctx, d, "gone2", bson.Binary{}); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	// A participant that restarts while a rename holds its critical sections blocks the
	// namespaces again before it takes writes (persisted sections): a routed write to the
	// source's chunk on it must not land (it would create a ghost copy of the renamed
	// collection) until the coordinator, resumed from its fail point, unblocks it.
	t.Run("participantRestartKeepsTheCriticalSection", func(t *testing.T) {
		shardTwo(t, "ren.r3", 60) // k ≥ 30 on shard1
		direct := d.Shards[0].Client.Database("admin")
		fp := "hangRenameCollectionAfterParticipantsRenamed"
		base := setFailPoint(ctx, t, direct, fp, "alwaysOn")
		done := make(chan error, 1)
		go func() {
			done <- admin.RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "ren.r3"}, {Key: "to", Value: "ren.r3b"}}).Err()
		}()
		waitFailPoint(ctx, t, direct, fp, base, done)
		n1 := d.Shards[1].Nodes[0]
		if err := n1.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := n1.Start(ctx); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); ; {
			var hello struct {
				Writable bool `bson:"isWritablePrimary"`
			}
			err := d.Shards[1].Client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello)
			if err == nil && hello.Writable {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the restarted participant never became primary (%v)", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
		_, werr := d.Client.Database("ren").Collection("r3").InsertOne(wctx, bson.D{{Key: "_id", Value: 1000}, {Key: "k", Value: 59}})
		wcancel()
		if werr == nil {
			t.Fatal("a routed write reached the restarted participant inside the rename's critical section")
		}
		setFailPoint(ctx, t, direct, fp, "off")
		if err := <-done; err != nil {
			t.Fatalf("the rename after the participant's restart: %v", err)
		}
		if count(t, "ren.r3b") != 60 || count(t, "ren.r3") != 0 {
			t.Fatal("the rename lost documents, or the blocked write landed")
		}
		if names, err := d.Shards[1].Client.Database("ren").ListCollectionNames(ctx, bson.D{{Key: "name", Value: "r3"}}); err != nil || len(names) != 0 {
			t.Fatalf("the restarted participant holds a copy of the renamed source: %v (%v)", names, err)
		}
		checkUUIDs(ctx, t, d, "ren")
	})

	for _, k := range kills {
		t.Run("kill/"+k.name, func(t *testing.T) {
			k.setup(t)
			first := killAtFailPoint(ctx, t, d, k.failPoint, k.op, k.atFailPoint)
			if first != nil {
				// The router gave up while the shard had no primary: the application retries,
				// and the retry finds the operation done by the resumed coordinator.
				t.Logf("%s through the router during the failover: %v", k.name, first)
				if err := k.op(); !k.retried(err) {
					t.Fatalf("%s retried after the failover: %v", k.name, err)
				}
			}
			k.check(t)
			checkUUIDs(ctx, t, d, "ren")
			for _, sh := range d.Shards {
				if n, err := sh.Client.Database("config").Collection("collection_critical_sections").CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
					t.Fatalf("%s keeps %d critical sections after the DDL (%v)", sh.Topology.Name, n, err)
				}
			}
		})
	}
}

func splitNS(ns string) (db, coll string) {
	for i := range ns {
		if ns[i] == '.' {
			return ns[:i], ns[i+1:]
		}
	}
	return ns, ""
}

func isCode(code int32) func(error) bool {
	return func(err error) bool {
		var ce mongo.CommandError
		return errors.As(err, &ce) && ce.Code == code
	}
}

// configUUID is ns's config.collections UUID (the test fails when it has none).
func configUUID(ctx context.Context, t *testing.T, d *Deployment, ns string) bson.Binary {
	t.Helper()
	var entry struct {
		UUID bson.Binary `bson:"uuid"`
	}
	if err := d.Config.Client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: ns}}).Decode(&entry); err != nil {
		t.Fatalf("config.collections %s: %v", ns, err)
	}
	return entry.UUID
}

// checkUUIDs: every collection of db that config.collections has is, on every shard that
// lists it, the same incarnation (UUID).
func checkUUIDs(ctx context.Context, t *testing.T, d *Deployment, db string) {
	t.Helper()
	cur, err := d.Config.Client.Database("config").Collection("collections").Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$regex", Value: "^" + db + `\.`}}}})
	if err != nil {
		t.Fatal(err)
	}
	var entries []struct {
		NS   string      `bson:"_id"`
		UUID bson.Binary `bson:"uuid"`
	}
	if err := cur.All(ctx, &entries); err != nil {
		t.Fatal(err)
	}
	for _, sh := range d.Shards {
		specs, err := sh.Client.Database(db).ListCollectionSpecifications(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		local := map[string]bson.Binary{}
		for _, s := range specs {
			if s.UUID != nil {
				local[db+"."+s.Name] = *s.UUID
			}
		}
		for _, e := range entries {
			if u, ok := local[e.NS]; ok && !bytesEqual(u.Data, e.UUID.Data) {
				t.Fatalf("%s lists %s with UUID %x, config.collections has %x", sh.Topology.Name, e.NS, u.Data, e.UUID.Data)
			}
		}
	}
}

// droppedDatabaseCheck: no config.databases entry, no sharded collection or chunk of it (of
// uuid's incarnation, when given), no shard lists the database.
func droppedDatabaseCheck(ctx context.Context, d *Deployment, db string, uuid bson.Binary) error {
	cfg := d.Config.Client.Database("config")
	if n, err := cfg.Collection("databases").CountDocuments(ctx, bson.D{{Key: "_id", Value: db}}); err != nil || n != 0 {
		return fmt.Errorf("config.databases still has %s (%v)", db, err)
	}
	if n, err := cfg.Collection("collections").CountDocuments(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$regex", Value: "^" + db + `\.`}}}}); err != nil || n != 0 {
		return fmt.Errorf("config.collections still has %d collections of %s (%v)", n, db, err)
	}
	if uuid.Data != nil {
		if n, err := cfg.Collection("chunks").CountDocuments(ctx, bson.D{{Key: "uuid", Value: uuid}}); err != nil || n != 0 {
			return fmt.Errorf("config.chunks still has %d chunks of %s (%v)", n, db, err)
		}
	}
	for _, sh := range d.Shards {
		names, err := sh.Client.ListDatabaseNames(ctx, bson.D{{Key: "name", Value: db}})
		if err != nil || len(names) != 0 {
			return fmt.Errorf("%s still lists database %s (%v)", sh.Topology.Name, db, err)
		}
	}
	return nil
}

// setFailPoint sets a fail point's mode and returns how often it was entered before (the
// count is cumulative over the process's life).
func setFailPoint(ctx context.Context, t *testing.T, admin *mongo.Database, name, mode string) int64 {
	t.Helper()
	res, err := admin.RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: mode}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	n, _ := res.Lookup("count").AsInt64OK()
	return n
}

// waitFailPoint waits until the fail point (alwaysOn) was entered more than base times;
// done reports an operation that ended before it.
func waitFailPoint(ctx context.Context, t *testing.T, admin *mongo.Database, name string, base int64, done <-chan error) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		if setFailPoint(ctx, t, admin, name, "alwaysOn") > base {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("the operation ended before its fail point %s: %v", name, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operation never reached the fail point %s", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killAtFailPoint runs op (through the router) until the primary shard's primary (shard 0,
// one member) hangs at failPoint, kills it (kill -9) and restarts it: the fail point is off
// in the new process, its step-up resumes the coordinator. It returns op's own result once
// the coordinator's document is gone.
func killAtFailPoint(ctx context.Context, t *testing.T, d *Deployment, failPoint string, op func() error, atFailPoint func(*testing.T)) error {
	t.Helper()
	direct := d.Shards[0].Client.Database("admin")
	base := setFailPoint(ctx, t, direct, failPoint, "alwaysOn")
	done := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { done <- op() })
	defer wg.Wait()
	killed := false
	defer func() {
		if !killed { // a failed check: let op end
			_ = direct.RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: failPoint}, {Key: "mode", Value: "off"}}).Err()
		}
	}()
	waitFailPoint(ctx, t, direct, failPoint, base, done)
	if n, err := d.Shards[0].Client.Database("config").Collection("system.sharding_ddl_coordinators").CountDocuments(ctx, bson.D{}); err != nil || n == 0 {
		t.Fatalf("no coordinator state document at the fail point (%v)", err)
	}
	if atFailPoint != nil {
		atFailPoint(t)
	}
	primary := d.Shards[0].Nodes[0]
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	killed = true
	if err := primary.Start(ctx); err != nil {
		t.Fatal(err)
	}
	first := <-done
	for deadline := time.Now().Add(time.Minute); ; {
		n, err := d.Shards[0].Client.Database("config").Collection("system.sharding_ddl_coordinators").CountDocuments(ctx, bson.D{})
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator's document stays: %d (%v)", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return first
}
