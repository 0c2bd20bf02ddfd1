package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// collMod through the primary shard's collMod coordinator (issue 14): a sharded collection
// with chunks on both shards is modified on both (index hidden, validator), an unsharded one
// on the primary, a refusal leaves the migrations allowed, a different concurrent request
// fails with 117 while the same one joins, and a kill -9 of the primary shard's primary in
// the middle still modifies every shard, once, and drains the coordinator's document. And
// create through the primary shard's create coordinator: on the primary, idempotent, and
// serialized with a rename of the same namespace by the DDL locks.
func TestCollModCoordinator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sharded cluster")
	}
	d := Start(t, Topology{Kind: Sharded, Shards: 2}, Options{Args: []string{"--setParameter", "enableTestCommands=1"}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cm := d.Client.Database("cm")
	run := func(t *testing.T, db string, cmd bson.D) bson.Raw {
		t.Helper()
		res, err := d.Client.Database(db).RunCommand(ctx, cmd).Raw()
		if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		return res
	}
	wantCode := func(t *testing.T, what string, err error, code int32) {
		t.Helper()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != code {
			t.Fatalf("%s: %v, want code %d", what, err, code)
		}
	}
	s0, s1 := d.Shards[0].Topology.Name, d.Shards[1].Topology.Name
	run(t, "admin", bson.D{{Key: "enableSharding", Value: "cm"}, {Key: "primaryShard", Value: s0}})
	run(t, "admin", bson.D{{Key: "shardCollection", Value: "cm.s"}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}})
	docs := make([]any, 20)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}, {Key: "v", Value: i}}
	}
	if _, err := cm.Collection("s").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	run(t, "admin", bson.D{{Key: "split", Value: "cm.s"}, {Key: "middle", Value: bson.D{{Key: "k", Value: 10}}}})
	run(t, "admin", bson.D{{Key: "moveChunk", Value: "cm.s"}, {Key: "find", Value: bson.D{{Key: "k", Value: 15}}}, {Key: "to", Value: s1}})
	if _, err := cm.Collection("s").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "v", Value: 1}}}); err != nil {
		t.Fatal(err)
	}

	// hidden reports the v_1 index's hidden flag on shard i.
	hidden := func(t *testing.T, i int) bool {
		t.Helper()
		cur, err := d.Shards[i].Client.Database("cm").Collection("s").Indexes().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var specs []bson.M
		if err := cur.All(ctx, &specs); err != nil {
			t.Fatal(err)
		}
		for _, s := range specs {
			if s["name"] == "v_1" {
				h, _ := s["hidden"].(bool)
				return h
			}
		}
		t.Fatalf("shard %d has no v_1 index", i)
		return false
	}
	// validator is the collection's validator on shard i (nil: none).
	validator := func(t *testing.T, i int, coll string) bson.Raw {
		t.Helper()
		specs, err := d.Shards[i].Client.Database("cm").ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: coll}})
		if err != nil || len(specs) != 1 {
			t.Fatalf("shard %d lists %s: %v %v", i, coll, specs, err)
		}
		v, ok := specs[0].Options.Lookup("validator").DocumentOK()
		if !ok {
			return nil
		}
		return v
	}
	rawShards := func(t *testing.T, reply bson.Raw) int {
		t.Helper()
		raw, ok := reply.Lookup("raw").DocumentOK()
		if !ok {
			t.Fatalf("collMod reply without raw: %s", reply)
		}
		elems, _ := raw.Elements()
		return len(elems)
	}
	migrationsAllowed := func(t *testing.T) bool {
		t.Helper()
		var entry bson.M
		if err := d.Config.Client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: "cm.s"}}).Decode(&entry); err != nil {
			t.Fatal(err)
		}
		allow, set := entry["allowMigrations"].(bool)
		return !set || allow
	}
	coordinatorDocs := func(t *testing.T) int64 {
		t.Helper()
		n, err := d.Shards[0].Client.Database("config").Collection("system.sharding_ddl_coordinators").CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	hide := func(h bool) bson.D {
		return bson.D{{Key: "collMod", Value: "s"}, {Key: "index", Value: bson.D{{Key: "name", Value: "v_1"}, {Key: "hidden", Value: h}}}}
	}

	t.Run("sharded and unsharded", func(t *testing.T) {
		reply := run(t, "cm", hide(true))
		if n := rawShards(t, reply); n != 2 {
			t.Fatalf("collMod of a collection on two shards answers %d shards: %s", n, reply)
		}
		if !hidden(t, 0) || !hidden(t, 1) {
			t.Fatal("the hidden index did not reach both shards")
		}
		run(t, "cm", bson.D{{Key: "collMod", Value: "s"}, {Key: "validator", Value: bson.D{{Key: "v", Value: bson.D{{Key: "$type", Value: "int"}}}}}})
		if validator(t, 0, "s") == nil || validator(t, 1, "s") == nil {
			t.Fatal("the validator did not reach both shards")
		}
		// The validator holds on both shards' documents through the router.
		for _, k := range []int{1, 19} {
			_, err := cm.Collection("s").InsertOne(ctx, bson.D{{Key: "k", Value: k}, {Key: "v", Value: "text"}})
			var we mongo.WriteException
			if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Code != 121 {
				t.Fatalf("an insert breaking the validator (k %d): %v, want code 121", k, err)
			}
		}
		if !migrationsAllowed(t) || coordinatorDocs(t) != 0 {
			t.Fatal("after collMod the migrations stay frozen or the coordinator's document stays")
		}
		// Unsharded: the primary shard alone, its fields first.
		if _, err := cm.Collection("u").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
			t.Fatal(err)
		}
		reply = run(t, "cm", bson.D{{Key: "collMod", Value: "u"}, {Key: "validator", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$exists", Value: true}}}}}})
		if n := rawShards(t, reply); n != 1 || validator(t, 0, "u") == nil {
			t.Fatalf("unsharded collMod: %s", reply)
		}
		// Refusals: nothing half-done, migrations allowed again.
		wantCode(t, "collMod of a missing collection", cm.RunCommand(ctx, bson.D{{Key: "collMod", Value: "nothing"}, {Key: "validator", Value: bson.D{}}}).Err(), 26)
		wantCode(t, "collMod of a missing index",
			cm.RunCommand(ctx, bson.D{{Key: "collMod", Value: "s"}, {Key: "index", Value: bson.D{{Key: "name", Value: "nope"}, {Key: "hidden", Value: true}}}}).Err(), 27)
		wantCode(t, "collMod in a database that does not exist",
			d.Client.Database("cmNone").RunCommand(ctx, bson.D{{Key: "collMod", Value: "x"}, {Key: "validator", Value: bson.D{}}}).Err(), 26)
		if !migrationsAllowed(t) || coordinatorDocs(t) != 0 {
			t.Fatal("after a refused collMod the migrations stay frozen or the coordinator's document stays")
		}
	})

	t.Run("conflict and join", func(t *testing.T) {
		direct := d.Shards[0].Client.Database("admin")
		const fp = "collModBeforeConfigServerUpdate"
		base := setFailPoint(ctx, t, direct, fp, "alwaysOn")
		errs := make(chan error, 2)
		var wg sync.WaitGroup
		defer wg.Wait()
		for range 2 { // the second one joins the first
			wg.Go(func() { errs <- cm.RunCommand(ctx, hide(false)).Err() })
		}
		waitFailPoint(ctx, t, direct, fp, base, errs)
		wantCode(t, "a different concurrent collMod", cm.RunCommand(ctx, hide(true)).Err(), 117)
		setFailPoint(ctx, t, direct, fp, "off")
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("the hanging collMod or the one joining it: %v", err)
			}
		}
		if hidden(t, 0) || hidden(t, 1) {
			t.Fatal("the joined collMod did not reach both shards")
		}
	})

	t.Run("kill -9 of the primary shard's primary", func(t *testing.T) {
		err := killAtFailPoint(ctx, t, d, "collModBeforeConfigServerUpdate", func() error {
			return cm.RunCommand(ctx, hide(true)).Err()
		}, nil)
		if err != nil {
			t.Fatalf("collMod across the kill: %v", err)
		}
		if !hidden(t, 0) || !hidden(t, 1) {
			t.Fatal("the resumed collMod did not reach both shards")
		}
		if !migrationsAllowed(t) {
			t.Fatal("the resumed collMod left the migrations frozen")
		}
		// The collection works on: a migration (of the chunk that never left shard 0: the
		// other one's range deletion there waits for the orphan cleanup delay) and a write.
		run(t, "admin", bson.D{{Key: "moveChunk", Value: "cm.s"}, {Key: "find", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "to", Value: s1}})
		if _, err := cm.Collection("s").InsertOne(ctx, bson.D{{Key: "k", Value: 30}, {Key: "v", Value: 30}}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("create under the DDL locks", func(t *testing.T) {
		run(t, "cm", bson.D{{Key: "create", Value: "made"}})
		run(t, "cm", bson.D{{Key: "create", Value: "made"}}) // the same options again: nothing to do
		if names, _ := d.Shards[0].Client.Database("cm").ListCollectionNames(ctx, bson.D{{Key: "name", Value: "made"}}); len(names) != 1 {
			t.Fatal("create did not reach the primary shard")
		}
		if names, _ := d.Shards[1].Client.Database("cm").ListCollectionNames(ctx, bson.D{{Key: "name", Value: "made"}}); len(names) != 0 {
			t.Fatal("create reached a shard that is not the primary")
		}
		capped := bson.D{{Key: "create", Value: "made"}, {Key: "capped", Value: true}, {Key: "size", Value: 4096}}
		wantCode(t, "create with other options", cm.RunCommand(ctx, capped).Err(), 48)
		// A create of a rename's target waits for the rename (both hold cm's and the
		// namespace's DDL locks): it then finds the renamed collection, with other options.
		if _, err := cm.Collection("src").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
			t.Fatal(err)
		}
		direct := d.Shards[0].Client.Database("admin")
		const fp = "hangRenameCollectionBeforeRename"
		base := setFailPoint(ctx, t, direct, fp, "alwaysOn")
		renamed, created := make(chan error, 1), make(chan error, 1)
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			renamed <- d.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "cm.src"}, {Key: "to", Value: "cm.dst"}}).Err()
		})
		waitFailPoint(ctx, t, direct, fp, base, renamed)
		wg.Go(func() {
			created <- cm.RunCommand(ctx, bson.D{{Key: "create", Value: "dst"}, {Key: "capped", Value: true}, {Key: "size", Value: 4096}}).Err()
		})
		// The create's coordinator is registered (its document is there) but waits for the
		// locks: nothing is created while the rename hangs.
		for deadline := time.Now().Add(time.Minute); coordinatorDocs(t) < 2; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the create's coordinator never started")
			}
		}
		if names, _ := d.Shards[0].Client.Database("cm").ListCollectionNames(ctx, bson.D{{Key: "name", Value: "dst"}}); len(names) != 0 {
			t.Fatal("the create ran while the rename of its namespace held the locks")
		}
		setFailPoint(ctx, t, direct, fp, "off")
		if err := <-renamed; err != nil {
			t.Fatalf("rename: %v", err)
		}
		wantCode(t, "create of the renamed collection with other options", <-created, 48)
		if n, err := cm.Collection("dst").CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
			t.Fatalf("the renamed collection counts %d (%v), want 1", n, err)
		}
		if coordinatorDocs(t) != 0 {
			t.Fatal("a coordinator's document stays")
		}
	})
}
