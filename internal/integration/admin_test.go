package integration

import (
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestIntegrationServerStatusCounters checks that CRUD commands move serverStatus counters as
// mongod's do: opcounters.insert counts documents, query counts finds, update and delete count
// statements, getmore counts getMores; metrics.document counts documents.
func TestIntegrationServerStatusCounters(t *testing.T) {
	s := newServer(t, "") // a private server: no other test's operations in the counters
	cl := connect(t, s.uri())
	db := cl.Database("counters")
	admin := cl.Database("admin")
	status := func() bson.Raw { return run(t, admin, d("serverStatus", 1)) }
	num := func(r bson.Raw, path string) int64 {
		v := lookup(t, r, path)
		n, ok := v.AsInt64OK()
		if !ok {
			t.Fatalf("%s is %v", path, v)
		}
		return n
	}
	before := status()
	run(t, db, d("insert", "c", "documents", a(d("_id", 1), d("_id", 2), d("_id", 3))))
	r := run(t, db, d("find", "c", "batchSize", 1))
	run(t, db, d("getMore", lookup(t, r, "cursor.id").Int64(), "collection", "c"))
	run(t, db, d("update", "c", "updates", a(d("q", d("_id", 1), "u", d("$set", d("x", 1))), d("q", d("_id", 2), "u", d("$set", d("x", 1))))))
	run(t, db, d("delete", "c", "deletes", a(d("q", d("_id", 3), "limit", 1))))
	after := status()
	for path, want := range map[string]int64{
		"opcounters.insert": 3, "opcounters.query": 1, "opcounters.getmore": 1,
		"opcounters.update": 2, "opcounters.delete": 1,
		"metrics.document.inserted": 3, "metrics.document.updated": 2, "metrics.document.deleted": 1,
		"metrics.document.returned": 3,
	} {
		if got := num(after, path) - num(before, path); got != want {
			t.Errorf("%s moved by %d, want %d", path, got, want)
		}
	}
}

// TestIntegrationListCommands checks every CRUD and DDL command of this wave is registered.
func TestIntegrationListCommands(t *testing.T) {
	r := run(t, shared(t).Database("admin"), d("listCommands", 1))
	cmds := lookup(t, r, "commands").Document()
	var missing []string
	for _, name := range []string{
		"insert", "update", "delete", "findAndModify", "find", "getMore", "killCursors", "count",
		"distinct", "explain", "create", "drop", "dropDatabase", "renameCollection", "collMod",
		"listDatabases", "listCollections", "createIndexes", "dropIndexes", "listIndexes",
		"validate", "dbStats", "collStats", "dataSize",
	} {
		if _, err := cmds.LookupErr(name); err != nil {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("listCommands lacks %v", missing)
	}
}

// TestIntegrationTTL checks the TTL monitor deletes expired documents of a TTL index (with the
// monitor's period shortened to 1 s) and leaves the others.
func TestIntegrationTTL(t *testing.T) {
	s := newServer(t, "", "--setParameter", "ttlMonitorSleepSecs=1")
	cl := connect(t, s.uri())
	db := cl.Database("ttl")
	coll := db.Collection("c")
	run(t, db, d("createIndexes", "c", "indexes", a(d("key", d("at", 1), "name", "at_1", "expireAfterSeconds", int32(60)))))
	now := time.Now()
	if _, err := coll.InsertMany(ctxT(t), []any{
		d("_id", "old", "at", bson.NewDateTimeFromTime(now.Add(-time.Hour))),
		d("_id", "old-in-array", "at", a(bson.NewDateTimeFromTime(now.Add(time.Hour)), bson.NewDateTimeFromTime(now.Add(-time.Hour)))),
		d("_id", "fresh", "at", bson.NewDateTimeFromTime(now)),
		d("_id", "not-a-date", "at", "yesterday"),
		d("_id", "missing"),
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := findAll(t, coll, bson.D{}, optsSortID())
		var ids []string
		for _, doc := range got {
			ids = append(ids, lookup(t, doc, "_id").StringValue())
		}
		if slices.Equal(ids, []string{"fresh", "missing", "not-a-date"}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15s with ttlMonitorSleepSecs=1 the collection holds %v, want [fresh missing not-a-date]", ids)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
