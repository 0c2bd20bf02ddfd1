package commands_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/commands"
	"humongo/internal/lock"
)

// Reply shapes MongoDB 7.0 gives and drivers, tools and the shell read (issue 10, "Shapes").

// shapeRun runs cmd on db and returns the reply, failing t on an error.
func shapeRun(t *testing.T, ts *testServer, db string, cmd bson.D) bson.Raw {
	t.Helper()
	r, err := ts.cl.Database(db).RunCommand(context.Background(), cmd).Raw()
	if err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	return r
}

func TestShapeHelloConnectionID(t *testing.T) {
	ts := startTestServer(t)
	r := shapeRun(t, ts, "admin", bson.D{{Key: "hello", Value: 1}})
	if v := r.Lookup("connectionId"); v.Type != bson.TypeInt32 || v.Int32() <= 0 {
		t.Errorf("connectionId %v (%v), want a positive int32", v, v.Type)
	}
}

func TestShapeCollStats(t *testing.T) {
	ts := startTestServer(t)
	shapeRun(t, ts, "t", bson.D{{Key: "create", Value: "cap"}, {Key: "capped", Value: true}, {Key: "size", Value: 8192}})
	r := shapeRun(t, ts, "t", bson.D{{Key: "collStats", Value: "cap"}})
	if v := r.Lookup("maxSize"); v.Type != bson.TypeInt32 || v.Int32() != 8192 {
		t.Errorf("maxSize %v (%v), want int32 8192", v, v.Type)
	}
	// A missing collection: ok with zero statistics (MongoDB 7.0's collStats ignores
	// appendCollectionStorageStats' NamespaceNotFound).
	r = shapeRun(t, ts, "t", bson.D{{Key: "collStats", Value: "missing"}})
	want := []string{"ns", "size", "count", "numOrphanDocs", "storageSize", "totalSize", "nindexes",
		"totalIndexSize", "indexDetails", "indexSizes", "scaleFactor", "ok"}
	elems, _ := r.Elements()
	if len(elems) != len(want) {
		t.Fatalf("collStats of a missing collection: %v", r)
	}
	for i, e := range elems {
		if e.Key() != want[i] {
			t.Fatalf("field %d is %q, want %q: %v", i, e.Key(), want[i], r)
		}
	}
	if r.Lookup("ns").StringValue() != "t.missing" || r.Lookup("count").Int32() != 0 || r.Lookup("scaleFactor").Int32() != 1 {
		t.Errorf("collStats of a missing collection: %v", r)
	}
}

func TestShapeExplainCommandDB(t *testing.T) {
	ts := startTestServer(t)
	shapeRun(t, ts, "t", ins(bson.D{{Key: "a", Value: 1}}))
	for _, inner := range []bson.D{
		{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 1}}}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{}}},
		{{Key: "count", Value: "c"}},
	} {
		r := shapeRun(t, ts, "t", bson.D{{Key: "explain", Value: inner}})
		if db, ok := r.Lookup("command", "$db").StringValueOK(); !ok || db != "t" {
			t.Errorf("explain %v: command %v, want $db t", inner, r.Lookup("command"))
		}
	}
}

func TestShapeGetParameterAll(t *testing.T) {
	ts := startTestServer(t)
	r := shapeRun(t, ts, "admin", bson.D{{Key: "getParameter", Value: "*"}})
	if v := r.Lookup("authSchemaVersion"); v.Type != bson.TypeInt32 || v.Int32() != 5 {
		t.Errorf("authSchemaVersion %v", v)
	}
	if v := r.Lookup("allowDiskUseByDefault"); v.Type != bson.TypeBoolean || !v.Boolean() {
		t.Errorf("allowDiskUseByDefault %v", v)
	}
}

// TestShapeAllowDiskUseByDefault: a sort (find, or aggregate's $sort) over the memory limit
// spills without allowDiskUse while allowDiskUseByDefault is true (its default since 6.0), and
// fails with 292 when the command says allowDiskUse: false or the parameter is false.
func TestShapeAllowDiskUseByDefault(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()
	pad := make([]byte, 1000)
	docs := bson.A{}
	for i := range 300 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: (i * 7919) % 300}, {Key: "pad", Value: pad}})
	}
	shapeRun(t, ts, "t", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs}})
	shapeRun(t, ts, "admin", bson.D{{Key: "setParameter", Value: 1},
		{Key: "internalQueryMaxBlockingSortMemoryUsageBytes", Value: 50000}})
	sortFind := bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "batchSize", Value: 300}}
	sortAgg := agg(bson.D{{Key: "$sort", Value: bson.D{{Key: "k", Value: 1}}}})
	sortAgg[2].Value = bson.D{{Key: "batchSize", Value: 300}}
	count := func(t *testing.T, cmd bson.D) int {
		t.Helper()
		r := shapeRun(t, ts, "t", cmd)
		vals, _ := r.Lookup("cursor", "firstBatch").Array().Values()
		return len(vals)
	}
	fails := func(t *testing.T, cmd bson.D) {
		t.Helper()
		findCode(t, ts.cl.Database("t").RunCommand(ctx, cmd).Err(), 292)
	}
	withFalse := func(cmd bson.D) bson.D {
		return append(append(bson.D{}, cmd...), bson.E{Key: "allowDiskUse", Value: false})
	}
	for _, cmd := range []bson.D{sortFind, sortAgg} {
		if n := count(t, cmd); n == 0 {
			t.Errorf("%v without allowDiskUse: %d documents", cmd[0], n)
		}
		fails(t, withFalse(cmd))
	}
	if _, ok := ts.params.Spec("allowDiskUseByDefault"); !ok {
		t.Fatal("no allowDiskUseByDefault parameter")
	}
	shapeRun(t, ts, "admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "allowDiskUseByDefault", Value: false}})
	for _, cmd := range []bson.D{sortFind, sortAgg} {
		fails(t, cmd)
		if n := count(t, append(append(bson.D{}, cmd...), bson.E{Key: "allowDiskUse", Value: true})); n == 0 {
			t.Errorf("%v with allowDiskUse: %d documents", cmd[0], n)
		}
	}
}

func TestShapeDBStatsFreeStorage(t *testing.T) {
	ts := startTestServer(t)
	shapeRun(t, ts, "t", ins(bson.D{{Key: "a", Value: 1}}))
	r := shapeRun(t, ts, "t", bson.D{{Key: "dbStats", Value: 1}, {Key: "freeStorage", Value: 1}})
	for _, k := range []string{"freeStorageSize", "indexFreeStorageSize", "totalFreeStorageSize"} {
		if _, err := r.LookupErr(k); err != nil {
			t.Errorf("dbStats {freeStorage: 1} lacks %s: %v", k, r)
		}
	}
	r = shapeRun(t, ts, "t", bson.D{{Key: "dbStats", Value: 1}})
	if _, err := r.LookupErr("freeStorageSize"); err == nil {
		t.Errorf("dbStats without freeStorage has freeStorageSize: %v", r)
	}
}

func TestShapeServerStatusSections(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()
	shapeRun(t, ts, "t", ins(bson.D{{Key: "a", Value: 1}}))
	shapeRun(t, ts, "t", bson.D{{Key: "create", Value: "cap"}, {Key: "capped", Value: true}, {Key: "size", Value: 4096}})
	shapeRun(t, ts, "t", bson.D{{Key: "create", Value: "v"}, {Key: "viewOn", Value: "c"}, {Key: "pipeline", Value: bson.A{}}})
	_ = ts.cl.Database("t").RunCommand(ctx, bson.D{{Key: "nosuchcommand", Value: 1}}).Err()
	r := shapeRun(t, ts, "admin", bson.D{{Key: "serverStatus", Value: 1}})
	if n := r.Lookup("asserts", "user").AsInt64(); n < 1 {
		t.Errorf("asserts.user %d after a failed command: %v", n, r.Lookup("asserts"))
	}
	if v, err := r.LookupErr("globalLock", "totalTime"); err != nil || v.AsInt64() <= 0 {
		t.Errorf("globalLock %v", r.Lookup("globalLock"))
	}
	if n := r.Lookup("globalLock", "activeClients", "total").Int32(); n < 1 {
		t.Errorf("globalLock.activeClients.total %d (serverStatus itself runs)", n)
	}
	if n := r.Lookup("locks", "Global", "acquireCount", "w").AsInt64(); n < 1 {
		t.Errorf("locks.Global.acquireCount.w %d after writes: %v", n, r.Lookup("locks"))
	}
	if r.Lookup("storageEngine", "name").StringValue() != "pebble" || !r.Lookup("storageEngine", "supportsCommittedReads").Boolean() {
		t.Errorf("storageEngine %v", r.Lookup("storageEngine"))
	}
	if tx := r.Lookup("transactions").Document(); tx.Lookup("currentOpen").AsInt64() != 0 {
		t.Errorf("transactions %v", tx)
	}
	cs := r.Lookup("catalogStats").Document()
	// t.c, t.cap and t.system.views (a view definition's collection is a collection too).
	if cs.Lookup("collections").Int32() != 3 || cs.Lookup("capped").Int32() != 1 || cs.Lookup("views").Int32() != 1 {
		t.Errorf("catalogStats %v", cs)
	}
	// The Go heap in tcmalloc's shape: in use ≤ mapped.
	alloc, heap := r.Lookup("tcmalloc", "generic", "current_allocated_bytes").AsInt64(), r.Lookup("tcmalloc", "generic", "heap_size").AsInt64()
	if alloc <= 0 || heap < alloc {
		t.Errorf("tcmalloc %v", r.Lookup("tcmalloc"))
	}
	// Each section can be left out.
	r = shapeRun(t, ts, "admin", bson.D{{Key: "serverStatus", Value: 1}, {Key: "locks", Value: 0}, {Key: "catalogStats", Value: 0}, {Key: "tcmalloc", Value: 0}})
	for _, k := range []string{"locks", "catalogStats", "tcmalloc"} {
		if _, err := r.LookupErr(k); err == nil {
			t.Errorf("serverStatus {%s: 0} still has it", k)
		}
	}
}

// TestShapeCurrentOpLockWait: an aggregate blocked on a collection lock shows in currentOp
// with its collection namespace and waitingForLock, and in globalLock.currentQueue.
func TestShapeCurrentOpLockWait(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()
	shapeRun(t, ts, "t", ins(bson.D{{Key: "a", Value: 1}}))
	l := ts.db.Locks.NewLocker()
	scope, err := l.CollectionLock(ctx, "t.c", lock.ModeX)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- ts.cl.Database("t").RunCommand(ctx, agg(bson.D{{Key: "$match", Value: bson.D{}}})).Err()
	}()
	var op bson.Raw
	deadline := time.Now().Add(20 * time.Second)
	for op == nil && time.Now().Before(deadline) {
		r := shapeRun(t, ts, "admin", bson.D{{Key: "currentOp", Value: 1}, {Key: "command.aggregate", Value: "c"}, {Key: "waitingForLock", Value: true}})
		if vals, _ := r.Lookup("inprog").Array().Values(); len(vals) == 1 {
			op = vals[0].Document()
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if op == nil {
		_ = scope.Release()
		t.Fatal("the blocked aggregate never showed as waiting for a lock")
	}
	if ns := op.Lookup("ns").StringValue(); ns != "t.c" {
		t.Errorf("ns %q, want t.c", ns)
	}
	if v := op.Lookup("numYields"); v.Type != bson.TypeInt32 {
		t.Errorf("numYields %v", v)
	}
	// Blocked on the collection, it holds the global and database locks in intent-shared mode.
	if g, d := op.Lookup("locks", "Global").StringValue(), op.Lookup("locks", "Database").StringValue(); g != "r" || d != "r" {
		t.Errorf("locks %v, want Global and Database r", op.Lookup("locks"))
	}
	st := shapeRun(t, ts, "admin", bson.D{{Key: "serverStatus", Value: 1}})
	if n := st.Lookup("globalLock", "currentQueue", "readers").Int32(); n != 1 {
		t.Errorf("globalLock.currentQueue %v, want 1 reader", st.Lookup("globalLock", "currentQueue"))
	}
	if err := scope.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("aggregate after the lock was released: %v", err)
	}
}

// TestShapeServerStatusTransactions: a retried retryable write (on a replica-set member)
// counts in serverStatus.transactions.
func TestShapeServerStatusTransactions(t *testing.T) {
	ts, rc := startMember(t, t.TempDir(), 0)
	defer func() {
		rc.Close()
		ts.close(t)
	}()
	ctx := context.Background()
	sess, err := ts.cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	retry := bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 99}}}},
		{Key: "lsid", Value: sess.ID()}, {Key: "txnNumber", Value: int64(1)}}
	shapeRun(t, ts, "t", retry)
	shapeRun(t, ts, "t", retry) // the second attempt finds its statement already executed
	tx := shapeRun(t, ts, "admin", bson.D{{Key: "serverStatus", Value: 1}}).Lookup("transactions").Document()
	if tx.Lookup("retriedCommandsCount").AsInt64() != 1 || tx.Lookup("retriedStatementsCount").AsInt64() != 1 ||
		tx.Lookup("transactionsCollectionWriteCount").AsInt64() != 1 {
		t.Errorf("transactions %v", tx)
	}
}

// TestShapeListDatabasesStartup: after humongod's start records (commands.RecordStartup),
// listDatabases shows admin and local as a fresh mongod does; a restart adds a startup_log
// entry and leaves the FCV document alone.
func TestShapeListDatabasesStartup(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, dir)
	ctx := context.Background()
	if err := commands.RecordStartup(ctx, ts.srv.State(), true); err != nil {
		t.Fatal(err)
	}
	names, err := ts.cl.ListDatabaseNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || names[0] != "admin" || names[1] != "local" {
		t.Errorf("databases %v, want [admin local]", names)
	}
	fcv := ts.cl.Database("admin").Collection("system.version").FindOne(ctx, bson.D{{Key: "_id", Value: "featureCompatibilityVersion"}})
	var got struct{ Version string }
	if err := fcv.Decode(&got); err != nil || got.Version != "7.0" {
		t.Errorf("FCV document: %v %+v", err, got)
	}
	ts.close(t)
	ts = startServer(t, dir)
	defer ts.close(t)
	if err := commands.RecordStartup(ctx, ts.srv.State(), true); err != nil {
		t.Fatal(err)
	}
	n, err := ts.cl.Database("local").Collection("startup_log").CountDocuments(ctx, bson.D{})
	if err != nil || n != 2 {
		t.Errorf("startup_log holds %d documents (%v), want 2", n, err)
	}
	r := shapeRun(t, ts, "local", bson.D{{Key: "collStats", Value: "startup_log"}})
	if !r.Lookup("capped").Boolean() || r.Lookup("maxSize").AsInt64() != 10*1024*1024 {
		t.Errorf("startup_log collStats %v", r)
	}
}

// TestShapeListIndexesSpec: listIndexes shows v, key, name first and unique/sparse as
// booleans whatever number they were given as.
func TestShapeListIndexesSpec(t *testing.T) {
	ts := startTestServer(t)
	shapeRun(t, ts, "t", bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "name", Value: "x_1"}, {Key: "sparse", Value: 12345}, {Key: "key", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "unique", Value: 1.0}},
	}}})
	r := shapeRun(t, ts, "t", bson.D{{Key: "listIndexes", Value: "c"}})
	specs, _ := r.Lookup("cursor", "firstBatch").Array().Values()
	if len(specs) != 2 {
		t.Fatalf("listIndexes %v", r)
	}
	spec := specs[1].Document()
	elems, _ := spec.Elements()
	var keys []string
	for _, e := range elems {
		keys = append(keys, e.Key())
	}
	want := []string{"v", "key", "name", "sparse", "unique"}
	if len(keys) != len(want) {
		t.Fatalf("spec %v, want fields %v", spec, want)
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Fatalf("spec %v, want fields %v", spec, want)
		}
	}
	if v := spec.Lookup("sparse"); v.Type != bson.TypeBoolean || !v.Boolean() {
		t.Errorf("sparse %v", v)
	}
	if v := spec.Lookup("unique"); v.Type != bson.TypeBoolean || !v.Boolean() {
		t.Errorf("unique %v", v)
	}
}

// TestShapeOplogReplicationInfo: what rs.printReplicationInfo() reads on a member: the
// oplog's maxSize through collStats and $collStats (mongosh's stats()), and its first and last
// entries in natural order.
func TestShapeOplogReplicationInfo(t *testing.T) {
	ts, rc := startMember(t, t.TempDir(), 0)
	defer func() {
		rc.Close()
		ts.close(t)
	}()
	shapeRun(t, ts, "t", ins(bson.D{{Key: "a", Value: 1}}))
	r := shapeRun(t, ts, "local", bson.D{{Key: "collStats", Value: "oplog.rs"}})
	maxSize := r.Lookup("maxSize").AsInt64()
	if !r.Lookup("capped").Boolean() || maxSize <= 0 {
		t.Fatalf("collStats local.oplog.rs: %v", r)
	}
	r = shapeRun(t, ts, "local", bson.D{{Key: "aggregate", Value: "oplog.rs"},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}}}}}},
		{Key: "cursor", Value: bson.D{}}})
	if got := r.Lookup("cursor", "firstBatch", "0", "storageStats", "maxSize").AsInt64(); got != maxSize {
		t.Errorf("$collStats storageStats.maxSize %d, want %d", got, maxSize)
	}
	var ends []int64
	for _, dir := range []int{1, -1} {
		r = shapeRun(t, ts, "local", bson.D{{Key: "find", Value: "oplog.rs"}, {Key: "sort", Value: bson.D{{Key: "$natural", Value: dir}}}, {Key: "limit", Value: 1}})
		sec, _ := r.Lookup("cursor", "firstBatch", "0", "ts").Timestamp()
		if sec == 0 {
			t.Fatalf("oplog entry in order %d: %v", dir, r)
		}
		ends = append(ends, int64(sec))
	}
	if ends[0] > ends[1] {
		t.Errorf("first entry at %d is after the last at %d", ends[0], ends[1])
	}
}
