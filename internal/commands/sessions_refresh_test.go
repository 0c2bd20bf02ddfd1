package commands_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/commands"
	"humongo/internal/repl/applier/repltest"
	"humongo/internal/txn/lsc"
)

// sessionKey is the cache key of a driver session (no authentication: the no-user uid).
func sessionKey(t *testing.T, s *mongo.Session) (lsc.Key, bson.D) {
	t.Helper()
	_, id, ok := s.ID().Lookup("id").BinaryOK()
	if !ok || len(id) != 16 {
		t.Fatalf("session id %v", s.ID())
	}
	k := lsc.Key{UID: lsc.NoUserUID}
	copy(k.ID[:], id)
	return k, bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: id}}}
}

func errCode(err error) int32 {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		for _, c := range []int32{11601, 43, 237} {
			if se.HasErrorCode(int(c)) {
				return c
			}
		}
	}
	return 0
}

// sessionDoc returns the config.system.sessions document of k, nil if there is none.
func sessionDoc(t *testing.T, ctx context.Context, cl *mongo.Client, k lsc.Key) bson.Raw {
	t.Helper()
	id := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: k.ID[:]}}, {Key: "uid", Value: bson.Binary{Subtype: 0, Data: k.UID[:]}}}
	raw, err := cl.Database("config").Collection("system.sessions").FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil
	}
	if err != nil {
		t.Fatalf("find session: %v", err)
	}
	return raw
}

func TestLogicalSessionsPersistAndKill(t *testing.T) {
	ts := startTestServer(t)
	if err := ts.params.SetString("enableTestCommands", "1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := ts.cl.Database("admin")
	run := func(cmd bson.D) error { return admin.RunCommand(ctx, cmd).Err() }
	refresh := func() {
		t.Helper()
		if err := run(bson.D{{Key: "refreshLogicalSessionCacheNow", Value: 1}}); err != nil {
			t.Fatalf("refreshLogicalSessionCacheNow: %v", err)
		}
	}
	coll := ts.cl.Database("app").Collection("c")
	var docs []any
	for i := range 20 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	// Before any refresh there is no config database.
	names, err := ts.cl.ListDatabaseNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == "config" {
			t.Fatalf("config listed before the sessions collection exists: %v", names)
		}
	}

	// Session 1: a find leaves a cursor open; a refresh persists the session.
	s1, err := ts.cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s1.EndSession(ctx)
	k1, lsid1 := sessionKey(t, s1)
	ctx1 := mongo.NewSessionContext(ctx, s1)
	cur1, err := coll.Find(ctx1, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	refresh()
	d := sessionDoc(t, ctx, ts.cl, k1)
	if d == nil {
		t.Fatal("session 1 not in config.system.sessions after refresh")
	}
	if lu, ok := d.Lookup("lastUse").TimeOK(); !ok || lu.Before(before) || lu.After(time.Now().Add(time.Second)) {
		t.Fatalf("lastUse %v of %v", d.Lookup("lastUse"), d)
	}
	// The TTL index, and config listed now that it holds a collection.
	specs, err := ts.cl.Database("config").Collection("system.sessions").Indexes().ListSpecifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ttl *mongo.IndexSpecification
	for i := range specs {
		if specs[i].Name == "lsidTTLIndex" {
			ttl = &specs[i]
		}
	}
	if ttl == nil || ttl.ExpireAfterSeconds == nil || *ttl.ExpireAfterSeconds != 1800 ||
		bson.Raw(ttl.KeysDocument).String() != `{"lastUse": {"$numberInt":"1"}}` {
		t.Fatalf("TTL index: %+v", ttl)
	}
	names, _ = ts.cl.ListDatabaseNames(ctx, bson.D{})
	foundConfig := false
	for _, n := range names {
		foundConfig = foundConfig || n == "config"
	}
	if !foundConfig {
		t.Errorf("listDatabases %v lacks config", names)
	}

	// Session 2 on another client: a cursor and a running find blocked by failCommand.
	cl2, err := mongo.Connect(options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", ts.srv.Port())).SetAppName("killSessionsTest").
		SetRetryReads(false).SetRetryWrites(false))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl2.Disconnect(context.Background()) }()
	s2, err := cl2.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s2.EndSession(ctx)
	k2, lsid2 := sessionKey(t, s2)
	ctx2 := mongo.NewSessionContext(ctx, s2)
	coll2 := cl2.Database("app").Collection("c")
	cur2, err := coll2.Find(ctx2, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := run(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"find"}}, {Key: "blockConnection", Value: true},
			{Key: "blockTimeMS", Value: 60000}, {Key: "appName", Value: "killSessionsTest"}}}}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = run(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}})
	}()
	var wg sync.WaitGroup
	var blockedErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		blockedErr = coll2.FindOne(ctx2, bson.D{}).Err()
	}()
	st := ts.srv.State()
	deadline := time.Now().Add(30 * time.Second)
	for running := false; !running; {
		for _, k := range st.ActiveOpSessions() {
			running = running || k == k2
		}
		if time.Now().After(deadline) {
			t.Fatal("the blocked find never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var hooked []bool
	st.Sessions.OnKill(func(match func(lsc.Key) bool) { hooked = append(hooked, match(k2), match(k1)) })

	if err := run(bson.D{{Key: "killSessions", Value: bson.A{lsid2}}}); err != nil {
		t.Fatalf("killSessions: %v", err)
	}
	wg.Wait()
	if errCode(blockedErr) != 11601 {
		t.Fatalf("killed find: %v, want Interrupted (11601)", blockedErr)
	}
	for cur2.Next(ctx2) {
	}
	if errCode(cur2.Err()) != 43 {
		t.Fatalf("getMore on the killed session's cursor: %v, want CursorNotFound (43)", cur2.Err())
	}
	if len(hooked) != 2 || !hooked[0] || hooked[1] {
		t.Fatalf("kill hook matched %v, want [true false]", hooked)
	}
	// Session 1 was not killed: its cursor still returns batches.
	if !cur1.Next(ctx1) {
		t.Fatalf("session 1's cursor: %v", cur1.Err())
	}

	// endSessions: the next refresh removes the record and kills the session's cursor.
	if err := run(bson.D{{Key: "endSessions", Value: bson.A{lsid1}}}); err != nil {
		t.Fatal(err)
	}
	refresh()
	if d := sessionDoc(t, ctx, ts.cl, k1); d != nil {
		t.Fatalf("ended session still stored: %v", d)
	}
	for cur1.Next(ctx1) {
	}
	if errCode(cur1.Err()) != 43 {
		t.Fatalf("getMore on the ended session's cursor: %v, want CursorNotFound (43)", cur1.Err())
	}

	// A session whose record expired (the TTL monitor's delete, done here by hand) loses its
	// cursors at the next refresh; reaping then removes its config.transactions entry while
	// a live session's entry stays.
	s3, err := ts.cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s3.EndSession(ctx)
	k3, _ := sessionKey(t, s3)
	ctx3 := mongo.NewSessionContext(ctx, s3)
	cur3, err := coll.Find(ctx3, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	refresh()
	if sessionDoc(t, ctx, ts.cl, k3) == nil {
		t.Fatal("session 3 not stored")
	}
	lsidDoc := func(k lsc.Key) bson.D {
		return bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: k.ID[:]}}, {Key: "uid", Value: bson.Binary{Subtype: 0, Data: k.UID[:]}}}
	}
	if _, err := ts.cl.Database("config").Collection("system.sessions").DeleteOne(ctx, bson.D{{Key: "_id", Value: lsidDoc(k3)}}); err != nil {
		t.Fatal(err)
	}
	refresh()
	for cur3.Next(ctx3) {
	}
	if errCode(cur3.Err()) != 43 {
		t.Fatalf("getMore on the expired session's cursor: %v, want CursorNotFound (43)", cur3.Err())
	}

	s4, err := ts.cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s4.EndSession(ctx)
	k4, _ := sessionKey(t, s4)
	if err := coll.FindOne(mongo.NewSessionContext(ctx, s4), bson.D{}).Err(); err != nil {
		t.Fatal(err)
	}
	refresh()
	// cur3's failed getMore used session 3 again, so that refresh stored it again: expire it
	// once more.
	if _, err := ts.cl.Database("config").Collection("system.sessions").DeleteOne(ctx, bson.D{{Key: "_id", Value: lsidDoc(k3)}}); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	txns := ts.cl.Database("config").Collection("transactions")
	for _, k := range []lsc.Key{k3, k4} {
		if _, err := txns.InsertOne(ctx, bson.D{{Key: "_id", Value: lsidDoc(k)}, {Key: "txnNum", Value: int64(1)},
			{Key: "lastWriteDate", Value: old}}); err != nil {
			t.Fatalf("insert config.transactions: %v", err)
		}
	}
	if err := run(bson.D{{Key: "reapLogicalSessionCacheNow", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	left := map[lsc.Key]bool{}
	c, err := txns.Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for c.Next(ctx) {
		_, id, _ := c.Current.Lookup("_id", "id").BinaryOK()
		k := lsc.Key{UID: lsc.NoUserUID}
		copy(k.ID[:], id)
		left[k] = true
	}
	if left[k3] || !left[k4] {
		t.Fatalf("config.transactions after reap: expired kept=%v, live kept=%v", left[k3], left[k4])
	}
	var ss bson.Raw
	if ss, err = admin.RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Raw(); err != nil {
		t.Fatal(err)
	}
	if n, _ := ss.Lookup("logicalSessionRecordCache", "lastTransactionReaperJobEntriesCleanedUp").AsInt64OK(); n != 1 {
		t.Errorf("serverStatus logicalSessionRecordCache: %v", ss.Lookup("logicalSessionRecordCache"))
	}
}

// TestReplSetSessionsWrittenByPrimaryOnly: a secondary's refresh writes nothing (no
// config.system.sessions of its own); the primary's creates the collection and its records,
// which replicate.
func TestReplSetSessionsWrittenByPrimaryOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a replica set")
	}
	ns := repltest.StartReplSet(t, repltest.ReplSetOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, s := ns[0], ns[1]
	for _, n := range ns {
		if err := n.Srv.State().Params.SetString("enableTestCommands", "1"); err != nil {
			t.Fatal(err)
		}
	}
	kp := lsc.Key{ID: [16]byte{1}, UID: lsc.NoUserUID}
	ks := lsc.Key{ID: [16]byte{2}, UID: lsc.NoUserUID}
	if err := p.Srv.State().Sessions.Vivify(kp, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Srv.State().Sessions.Vivify(ks, ""); err != nil {
		t.Fatal(err)
	}
	refreshOn := func(n *repltest.Node) {
		t.Helper()
		if err := n.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "refreshLogicalSessionCacheNow", Value: 1}}).Err(); err != nil {
			t.Fatalf("%s refreshLogicalSessionCacheNow: %v", n.Host, err)
		}
	}
	refreshOn(s)
	if _, ok := s.DB.Catalog.Latest().ByNS("config.system.sessions"); ok {
		t.Fatal("the secondary created config.system.sessions")
	}
	refreshOn(p)
	if sessionDoc(t, ctx, p.Client, kp) == nil {
		t.Fatal("the primary's session is not stored")
	}
	// Everything the secondary holds came from the primary's oplog.
	checkSameAndHealthy(t, ctx, ns, "config")
	if _, ok := s.DB.Catalog.Latest().ByNS("config.system.sessions"); !ok {
		t.Fatal("config.system.sessions did not replicate")
	}
	if sessionDoc(t, ctx, p.Client, ks) != nil {
		t.Fatal("the secondary's session was written")
	}
}

// TestSessionRefresherPeriodic: the background refresh persists a used session without the
// test command, and its stop returns once the goroutine has ended.
func TestSessionRefresherPeriodic(t *testing.T) {
	ts := startTestServer(t)
	if err := ts.params.SetString("logicalSessionRefreshMillis", "20"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stop := commands.StartSessionRefresher(context.Background(), ts.srv.State())
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	s, err := ts.cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.EndSession(ctx)
	k, _ := sessionKey(t, s)
	if err := ts.cl.Database("app").Collection("c").FindOne(mongo.NewSessionContext(ctx, s), bson.D{}).Err(); err != nil &&
		!errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatal(err)
	}
	for sessionDoc(t, ctx, ts.cl, k) == nil {
		if ctx.Err() != nil {
			t.Fatal("the periodic refresh never stored the session")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	stopped = true
	n := ts.srv.State().Sessions.Stats().SessionsCollectionJobCount
	time.Sleep(100 * time.Millisecond)
	if m := ts.srv.State().Sessions.Stats().SessionsCollectionJobCount; m != n {
		t.Fatalf("refreshes went on after stop: %d -> %d", n, m)
	}
}

func TestKillSessionsBadInput(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()
	run := func(cmd bson.D) error { return ts.cl.Database("admin").RunCommand(ctx, cmd).Err() }
	uid := bson.Binary{Subtype: 0, Data: make([]byte, 32)}
	for _, c := range []struct {
		cmd  bson.D
		code int32
	}{
		{bson.D{{Key: "killAllSessionsByPattern", Value: bson.A{bson.D{{Key: "bogus", Value: 1}}}}}, 40415},
		{bson.D{{Key: "killAllSessionsByPattern", Value: bson.A{bson.D{{Key: "uid", Value: "x"}}}}}, 14},
		{bson.D{{Key: "killAllSessionsByPattern", Value: bson.A{bson.D{{Key: "uid", Value: bson.Binary{Data: []byte{1}}}}}}}, 12},
		{bson.D{{Key: "killAllSessionsByPattern", Value: bson.A{bson.D{{Key: "users", Value: bson.A{
			bson.D{{Key: "user", Value: "a"}, {Key: "db", Value: "x"}}, bson.D{{Key: "user", Value: "b"}, {Key: "db", Value: "x"}}}}}}}}, 2},
		{bson.D{{Key: "killAllSessionsByPattern", Value: bson.A{bson.D{{Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: "r"}}}}}}}}, 40414},
		{bson.D{{Key: "killAllSessionsByPattern", Value: 1}}, 14},
		{bson.D{{Key: "killAllSessions", Value: bson.A{bson.D{{Key: "user", Value: "a"}}}}}, 40414},
		{bson.D{{Key: "killSessions", Value: bson.A{bson.D{{Key: "id", Value: 1}}}}}, 14},
	} {
		if got := errCode(run(c.cmd)); got != c.code {
			t.Errorf("%v: code %d, want %d", c.cmd, got, c.code)
		}
	}
	// Well-formed patterns are accepted (users/roles as impersonation data).
	for _, cmd := range []bson.D{
		{{Key: "killAllSessionsByPattern", Value: bson.A{bson.D{{Key: "uid", Value: uid}}}}},
		{{Key: "killAllSessionsByPattern", Value: bson.A{bson.D{{Key: "users", Value: bson.A{bson.D{{Key: "user", Value: "a"}, {Key: "db", Value: "x"}}}},
			{Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: "r"}, {Key: "db", Value: "x"}}}}}}}},
		{{Key: "killAllSessions", Value: bson.A{bson.D{{Key: "user", Value: "a"}, {Key: "db", Value: "x"}}}}},
		{{Key: "killSessions", Value: bson.A{}}},
	} {
		if err := run(cmd); err != nil {
			t.Errorf("%v: %v", cmd, err)
		}
	}
}

// TestSessionsCollectionSetupRepairs: a refresh puts the TTL index back when it was dropped
// (the collection holding records) and resets a changed expireAfterSeconds.
func TestSessionsCollectionSetupRepairs(t *testing.T) {
	ts := startTestServer(t)
	if err := ts.params.SetString("enableTestCommands", "1"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin := ts.cl.Database("admin")
	sessions := ts.cl.Database("config").Collection("system.sessions")
	refresh := func() {
		t.Helper()
		if err := admin.RunCommand(ctx, bson.D{{Key: "refreshLogicalSessionCacheNow", Value: 1}}).Err(); err != nil {
			t.Fatalf("refreshLogicalSessionCacheNow: %v", err)
		}
	}
	ttlSecs := func() int32 {
		t.Helper()
		specs, err := sessions.Indexes().ListSpecifications(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range specs {
			if s.Name == "lsidTTLIndex" && s.ExpireAfterSeconds != nil {
				return *s.ExpireAfterSeconds
			}
		}
		return -1
	}
	if err := ts.srv.State().Sessions.Vivify(lsc.Key{ID: [16]byte{7}, UID: lsc.NoUserUID}, ""); err != nil {
		t.Fatal(err)
	}
	refresh()
	if n, err := sessions.CountDocuments(ctx, bson.D{}); err != nil || n == 0 { // with the driver's implicit session
		t.Fatalf("records %d %v", n, err)
	}
	if err := ts.cl.Database("config").RunCommand(ctx, bson.D{{Key: "collMod", Value: "system.sessions"},
		{Key: "index", Value: bson.D{{Key: "name", Value: "lsidTTLIndex"}, {Key: "expireAfterSeconds", Value: 60}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	refresh()
	if got := ttlSecs(); got != 1800 {
		t.Fatalf("expireAfterSeconds after refresh: %d, want 1800", got)
	}
	if err := sessions.Indexes().DropOne(ctx, "lsidTTLIndex"); err != nil {
		t.Fatal(err)
	}
	refresh()
	if got := ttlSecs(); got != 1800 {
		t.Fatalf("TTL index after a refresh of a collection without it: %d, want 1800", got)
	}
}
