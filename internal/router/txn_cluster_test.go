package router_test

// Real-process tests of transactions through humongos (txn.go, txn_commit.go): the driver's
// transactions against a config server, two shards and a router.

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"

	"humongo/internal/cluster"
	"humongo/internal/mongoerr"
)

func TestRouterTransactions(t *testing.T) {
	sc := startShardedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admin := sc.router.Database("admin")
	run := func(cmd bson.D) {
		t.Helper()
		if err := admin.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%s: %v", cmd[0].Key, err)
		}
	}
	// app.t: [MinKey, -1000), [-1000, 0) and [1000, MaxKey) on sh0, [0, 1000) on sh1.
	run(bson.D{{Key: "shardCollection", Value: "app.t"}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}})
	for _, at := range []int{-1000, 0, 1000} {
		run(bson.D{{Key: "split", Value: "app.t"}, {Key: "middle", Value: bson.D{{Key: "k", Value: at}}}})
	}
	run(bson.D{{Key: "moveChunk", Value: "app.t"}, {Key: "find", Value: bson.D{{Key: "k", Value: 0}}}, {Key: "to", Value: "sh1"}})
	coll := sc.router.Database("app").Collection("t")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "k", Value: -100}}, bson.D{{Key: "k", Value: 100}}}); err != nil {
		t.Fatal(err)
	}
	count := func(filter bson.D) int64 {
		t.Helper()
		n, err := coll.CountDocuments(ctx, filter)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	newSession := func() *mongo.Session {
		t.Helper()
		s, err := sc.router.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.EndSession(context.Background()) })
		return s
	}

	t.Run("single shard commit, read own writes", func(t *testing.T) {
		s := newSession()
		_, err := s.WithTransaction(ctx, func(ctx context.Context) (any, error) {
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "k", Value: -1}, {Key: "x", Value: "a"}}); err != nil {
				return nil, err
			}
			var d bson.M
			if err := coll.FindOne(ctx, bson.D{{Key: "k", Value: -1}}).Decode(&d); err != nil {
				return nil, err // read your own write
			}
			if n := count(bson.D{{Key: "k", Value: -1}}); n != 0 {
				t.Errorf("outside the transaction before commit: %d documents", n)
			}
			return nil, nil
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		if n := count(bson.D{{Key: "k", Value: -1}}); n != 1 {
			t.Errorf("after commit: %d documents", n)
		}
	})

	t.Run("abort", func(t *testing.T) {
		s := newSession()
		if err := s.StartTransaction(); err != nil {
			t.Fatal(err)
		}
		sctx := mongo.NewSessionContext(ctx, s)
		if _, err := coll.InsertOne(sctx, bson.D{{Key: "k", Value: -2}}); err != nil {
			t.Fatal(err)
		}
		if err := s.AbortTransaction(ctx); err != nil {
			t.Fatalf("abort: %v", err)
		}
		if n := count(bson.D{{Key: "k", Value: -2}}); n != 0 {
			t.Errorf("after abort: %d documents", n)
		}
	})

	t.Run("multi-shard read-only", func(t *testing.T) {
		s := newSession()
		_, err := s.WithTransaction(ctx, func(ctx context.Context) (any, error) {
			cur, err := coll.Find(ctx, bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: bson.A{-100, 100}}}}})
			if err != nil {
				return nil, err
			}
			var docs []bson.M
			if err := cur.All(ctx, &docs); err != nil {
				return nil, err
			}
			if len(docs) != 2 {
				t.Errorf("read %d documents across both shards, want 2", len(docs))
			}
			return nil, nil
		})
		if err != nil {
			// Without readOnly from the shards this would take two-phase commit.
			t.Fatalf("read-only multi-shard transaction: %v", err)
		}
	})

	t.Run("one write shard among two", func(t *testing.T) {
		s := newSession()
		_, err := s.WithTransaction(ctx, func(ctx context.Context) (any, error) {
			if err := coll.FindOne(ctx, bson.D{{Key: "k", Value: -100}}).Err(); err != nil {
				return nil, err
			}
			_, err := coll.InsertOne(ctx, bson.D{{Key: "k", Value: 3}})
			return nil, err
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		if n := count(bson.D{{Key: "k", Value: 3}}); n != 1 {
			t.Errorf("after commit: %d documents", n)
		}
	})

	t.Run("snapshot atClusterTime", func(t *testing.T) {
		s := newSession()
		opts := options.Transaction().SetReadConcern(readconcern.Snapshot())
		if err := s.StartTransaction(opts); err != nil {
			t.Fatal(err)
		}
		sctx := mongo.NewSessionContext(ctx, s)
		// The first statement reaches sh0 only and fixes the transaction's cluster time.
		if err := coll.FindOne(sctx, bson.D{{Key: "k", Value: -100}}).Err(); err != nil {
			t.Fatal(err)
		}
		// A write on sh1 after it: sh1 joins later, at the same atClusterTime, so it must not
		// see it (a snapshot at sh1's newest data would). The write's timestamp follows the
		// cluster time sh1 was gossiped, so it lands after atClusterTime even within the same
		// second.
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "k", Value: 50}}); err != nil {
			t.Fatal(err)
		}
		fctx, fcancel := context.WithTimeout(sctx, 20*time.Second)
		defer fcancel()
		err := coll.FindOne(fctx, bson.D{{Key: "k", Value: 50}}).Err()
		if !errors.Is(err, mongo.ErrNoDocuments) {
			t.Errorf("sh1 read in the snapshot: %v, want no document", err)
		}
		if err := s.CommitTransaction(ctx); err != nil {
			t.Errorf("commit: %v", err)
		}
	})

	t.Run("two write shards", func(t *testing.T) {
		s := newSession()
		if err := s.StartTransaction(); err != nil {
			t.Fatal(err)
		}
		sctx := mongo.NewSessionContext(ctx, s)
		if _, err := coll.InsertMany(sctx, []any{bson.D{{Key: "k", Value: -4}}, bson.D{{Key: "k", Value: 4}}}); err != nil {
			t.Fatal(err)
		}
		// Not visible outside the transaction before the commit.
		if n := count(bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: bson.A{-4, 4}}}}}); n != 0 {
			t.Errorf("before the commit: %d documents visible", n)
		}
		// Two write shards: coordinateCommitTransaction to the coordinator shard, which
		// prepares both and commits them at one timestamp.
		if err := s.CommitTransaction(ctx); err != nil {
			t.Fatalf("two-phase commit: %v", err)
		}
		// The coordinator answers once the decision is durable; the participants commit
		// right after.
		deadline := time.Now().Add(20 * time.Second)
		for n := count(bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: bson.A{-4, 4}}}}}); n != 2; n = count(bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: bson.A{-4, 4}}}}}) {
			if time.Now().After(deadline) {
				t.Fatalf("after the two-phase commit: %d documents", n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	// A second router moves a chunk behind the first's back: the first router's next
	// statements are routed with a stale version.
	dir := cluster.MustBuild(t, "humongod", "humongos")
	r2 := cluster.StartProcess(t, cluster.ProcessOptions{Name: "router1", Binary: filepath.Join(dir, "humongos"), Dir: t.TempDir(), NoDBPath: true,
		Args: []string{"--configdb", sc.configDB, "--bind_ip", "127.0.0.1"}})
	admin2 := connectTo(t, r2.URI()).Database("admin")
	move := func(k int, to string) {
		t.Helper()
		if err := admin2.RunCommand(ctx, bson.D{{Key: "moveChunk", Value: "app.t"}, {Key: "find", Value: bson.D{{Key: "k", Value: k}}},
			{Key: "to", Value: to}}).Err(); err != nil {
			t.Fatalf("moveChunk by the second router: %v", err)
		}
	}

	t.Run("stale first statement is retried", func(t *testing.T) {
		move(1000, "sh1") // the first router still routes [1000, MaxKey) to sh0
		s := newSession()
		attempts := 0
		_, err := s.WithTransaction(ctx, func(ctx context.Context) (any, error) {
			attempts++
			_, err := coll.InsertOne(ctx, bson.D{{Key: "k", Value: 1005}})
			return nil, err
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		if attempts != 1 {
			t.Errorf("the client ran the transaction %d times: the router should retry the stale first statement itself", attempts)
		}
		if n := count(bson.D{{Key: "k", Value: 1005}}); n != 1 {
			t.Errorf("after commit: %d documents", n)
		}
	})

	t.Run("stale later statement aborts", func(t *testing.T) {
		s := newSession()
		if err := s.StartTransaction(); err != nil {
			t.Fatal(err)
		}
		sctx := mongo.NewSessionContext(ctx, s)
		if _, err := coll.InsertOne(sctx, bson.D{{Key: "k", Value: -6}}); err != nil {
			t.Fatal(err)
		}
		move(-2000, "sh1") // the first router still routes [MinKey, -1000) to sh0
		_, err := coll.InsertOne(sctx, bson.D{{Key: "k", Value: -2006}})
		var se mongo.ServerError
		if !errors.As(err, &se) || !se.HasErrorLabel("TransientTransactionError") {
			t.Fatalf("stale second statement: %v, want an error labelled TransientTransactionError", err)
		}
		if !se.HasErrorCode(int(mongoerr.StaleConfig)) {
			t.Errorf("error %v, want StaleConfig", err)
		}
		// The transaction is aborted on every participant: its first write never shows.
		if err := s.CommitTransaction(ctx); err == nil {
			t.Errorf("commit after the aborted statement succeeded")
		}
		_ = s.AbortTransaction(ctx)
		if n := count(bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: bson.A{-6, -2006}}}}}); n != 0 {
			t.Errorf("after the aborted transaction: %d documents", n)
		}
	})

	// create and createIndexes run on the database's primary shard as statements of the
	// transaction (as mongos 7.0): nothing shows before the commit; what the shard may not do
	// in a transaction is its error, and aborts the transaction.
	t.Run("create and createIndexes in a transaction", func(t *testing.T) {
		ddb := sc.router.Database("txnddl")
		s := newSession()
		if err := s.StartTransaction(); err != nil {
			t.Fatal(err)
		}
		sctx := mongo.NewSessionContext(ctx, s)
		idx := bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
			bson.D{{Key: "key", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "name", Value: "x_1"}}}}}
		if err := ddb.RunCommand(sctx, bson.D{{Key: "create", Value: "c"}}).Err(); err != nil {
			t.Fatalf("create in a transaction: %v", err)
		}
		if err := ddb.RunCommand(sctx, idx).Err(); err != nil {
			t.Fatalf("createIndexes in a transaction: %v", err)
		}
		if names, _ := ddb.ListCollectionNames(ctx, bson.D{}); len(names) != 0 {
			t.Errorf("collections before commit: %v", names)
		}
		if err := s.CommitTransaction(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		specs, err := ddb.Collection("c").Indexes().ListSpecifications(ctx)
		if err != nil || len(specs) != 2 {
			t.Fatalf("indexes after commit: %v %v", specs, err)
		}
		if _, err := ddb.Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
			t.Fatal(err)
		}
		s2 := newSession()
		if err := s2.StartTransaction(); err != nil {
			t.Fatal(err)
		}
		idx[1].Value = bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "y", Value: 1}}}, {Key: "name", Value: "y_1"}}}
		err = ddb.RunCommand(mongo.NewSessionContext(ctx, s2), idx).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != int32(mongoerr.OperationNotSupportedInTransaction) {
			t.Errorf("new index on an existing non-empty collection in a transaction: %v, want OperationNotSupportedInTransaction", err)
		}
		err = ddb.RunCommand(mongo.NewSessionContext(ctx, s2), bson.D{{Key: "create", Value: "c"}}).Err()
		if !errors.As(err, &ce) || ce.Code != int32(mongoerr.NoSuchTransaction) {
			t.Errorf("statement after the failed one: %v, want NoSuchTransaction (the failure aborted it)", err)
		}
		_ = s2.AbortTransaction(ctx)
		// DDL not allowed in a transaction: mongos's error, nothing sent to a shard.
		s3 := newSession()
		if err := s3.StartTransaction(); err != nil {
			t.Fatal(err)
		}
		err = ddb.RunCommand(mongo.NewSessionContext(ctx, s3), bson.D{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: "x_1"}}).Err()
		if !errors.As(err, &ce) || ce.Code != int32(mongoerr.OperationNotSupportedInTransaction) ||
			ce.Message != "Cannot run 'dropIndexes' in a multi-document transaction." {
			t.Errorf("dropIndexes in a transaction: %v", err)
		}
		_ = s3.AbortTransaction(ctx)
		if specs, _ := ddb.Collection("c").Indexes().ListSpecifications(ctx); len(specs) != 2 {
			t.Errorf("indexes after the refused dropIndexes: %v", specs)
		}
	})

	// The first participant only reads; the recovery shard (the first that wrote) is the
	// other. While the two-phase commit hangs before its decision, a client that lost the
	// commit's reply recovers through the second router with its recoveryToken: the recovery
	// shard must be the coordinator, or it finds its participant prepared with no coordinator
	// (51021, the outcome unknown) instead of joining the commit.
	t.Run("recovery through another router joins the coordinator", func(t *testing.T) {
		s := newSession()
		lsid := s.ID()
		const txnNumber = int64(5)
		stmt := func(db *mongo.Database, cmd bson.D) (bson.Raw, error) {
			cmd = append(cmd, bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: txnNumber},
				bson.E{Key: "autocommit", Value: false})
			return db.RunCommand(ctx, cmd).Raw()
		}
		app := sc.router.Database("app")
		if _, err := stmt(app, bson.D{{Key: "find", Value: "t"}, {Key: "filter", Value: bson.D{{Key: "k", Value: 100}}},
			{Key: "startTransaction", Value: true}}); err != nil {
			t.Fatal(err) // sh1, read-only: the first participant
		}
		if _, err := stmt(app, bson.D{{Key: "insert", Value: "t"}, {Key: "documents", Value: bson.A{bson.D{{Key: "k", Value: -7}}}}}); err != nil {
			t.Fatal(err) // sh0: the recovery shard
		}
		reply, err := stmt(app, bson.D{{Key: "insert", Value: "t"}, {Key: "documents", Value: bson.A{bson.D{{Key: "k", Value: 7}}}}})
		if err != nil {
			t.Fatal(err) // sh1 writes too: two-phase commit
		}
		token, ok := reply.Lookup("recoveryToken").DocumentOK()
		if got, _ := token.Lookup("recoveryShardId").StringValueOK(); !ok || got != "sh0" {
			t.Fatalf("recoveryToken %v, want recoveryShardId sh0", token)
		}
		const fp = "hangBeforeWritingDecision"
		failPoint := func(mode string) {
			for id, cl := range sc.shards {
				if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: fp}, {Key: "mode", Value: mode}}).Err(); err != nil {
					t.Fatalf("%s: configureFailPoint: %v", id, err)
				}
			}
		}
		failPoint("alwaysOn")
		defer failPoint("off")
		commit := func(admin *mongo.Database, extra ...bson.E) chan error {
			errc := make(chan error, 1)
			go func() {
				_, err := stmt(admin, append(bson.D{{Key: "commitTransaction", Value: 1}}, extra...))
				errc <- err
			}()
			return errc
		}
		first := commit(admin)
		if err := sc.shards["sh0"].Database("admin").RunCommand(ctx, bson.D{{Key: "waitForFailPoint", Value: fp},
			{Key: "timesEntered", Value: 1}, {Key: "maxTimeMS", Value: 30000}}).Err(); err != nil {
			t.Fatalf("the recovery shard sh0 never coordinated the commit: %v", err)
		}
		recovered := commit(admin2, bson.E{Key: "recoveryToken", Value: token})
		select {
		case err := <-recovered:
			t.Fatalf("recovery answered before the decision: %v", err)
		case <-time.After(500 * time.Millisecond):
		}
		failPoint("off")
		for what, errc := range map[string]chan error{"commit": first, "recovery through the second router": recovered} {
			if err := <-errc; err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
		// The participants commit right after the decision.
		deadline := time.Now().Add(20 * time.Second)
		for n := count(bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: bson.A{-7, 7}}}}}); n != 2; n = count(bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: bson.A{-7, 7}}}}}) {
			if time.Now().After(deadline) {
				t.Fatalf("after the commit: %d documents, want 2", n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("commit and abort without statements", func(t *testing.T) {
		s := newSession()
		if err := s.StartTransaction(); err != nil {
			t.Fatal(err)
		}
		// The driver sends nothing for an empty transaction; ask the router directly.
		lsid := s.ID()
		cmd := func(name string) error {
			return admin.RunCommand(ctx, bson.D{{Key: name, Value: 1}, {Key: "lsid", Value: lsid},
				{Key: "txnNumber", Value: int64(77)}, {Key: "autocommit", Value: false}}).Err()
		}
		err := cmd("abortTransaction")
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != int32(mongoerr.NoSuchTransaction) {
			t.Errorf("abort of an unknown transaction: %v", err)
		}
		err = cmd("commitTransaction")
		if !errors.As(err, &ce) || ce.Code != int32(mongoerr.Location50940) {
			t.Errorf("commit of an unknown transaction without recoveryToken: %v", err)
		}
		_ = s.AbortTransaction(ctx)
	})

	// killSessions through the router aborts the session's transaction on every shard: its
	// writes never show and its commit fails.
	t.Run("killSessions", func(t *testing.T) {
		s := newSession()
		if err := s.StartTransaction(); err != nil {
			t.Fatal(err)
		}
		sctx := mongo.NewSessionContext(ctx, s)
		if _, err := coll.InsertMany(sctx, []any{bson.D{{Key: "k", Value: -8}}, bson.D{{Key: "k", Value: 8}}}); err != nil {
			t.Fatal(err)
		}
		if err := admin.RunCommand(ctx, bson.D{{Key: "killSessions", Value: bson.A{s.ID()}}}).Err(); err != nil {
			t.Fatalf("killSessions: %v", err)
		}
		var ce mongo.CommandError
		if err := s.CommitTransaction(ctx); !errors.As(err, &ce) || ce.Code != int32(mongoerr.NoSuchTransaction) {
			t.Errorf("commit after killSessions: %v, want NoSuchTransaction", err)
		}
		if n := count(bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: bson.A{-8, 8}}}}}); n != 0 {
			t.Errorf("after the killed transaction: %d documents", n)
		}
	})

	// The router answers these from its own state, as mongos: a session it starts is used
	// and refreshed; whatsmyuri, hostInfo and getLog describe the router.
	t.Run("router's own sessions and diagnostics", func(t *testing.T) {
		var started struct {
			ID struct {
				ID bson.Binary `bson:"id"`
			} `bson:"id"`
			Timeout int32 `bson:"timeoutMinutes"`
		}
		if err := admin.RunCommand(ctx, bson.D{{Key: "startSession", Value: 1}}).Decode(&started); err != nil {
			t.Fatalf("startSession: %v", err)
		}
		if started.ID.ID.Subtype != 4 || len(started.ID.ID.Data) != 16 || started.Timeout != 30 {
			t.Fatalf("startSession: %+v", started)
		}
		lsid := bson.D{{Key: "id", Value: started.ID.ID}}
		if err := admin.RunCommand(ctx, bson.D{{Key: "refreshSessions", Value: bson.A{lsid}}}).Err(); err != nil {
			t.Errorf("refreshSessions: %v", err)
		}
		var me struct {
			You string `bson:"you"`
		}
		if err := admin.RunCommand(ctx, bson.D{{Key: "whatsmyuri", Value: 1}}).Decode(&me); err != nil || !strings.HasPrefix(me.You, "127.0.0.1:") {
			t.Errorf("whatsmyuri: %+v %v", me, err)
		}
		var host struct {
			System struct {
				NumCores int32 `bson:"numCores"`
			} `bson:"system"`
		}
		if err := admin.RunCommand(ctx, bson.D{{Key: "hostInfo", Value: 1}}).Decode(&host); err != nil || host.System.NumCores < 1 {
			t.Errorf("hostInfo: %+v %v", host, err)
		}
		var lg struct {
			Total int64    `bson:"totalLinesWritten"`
			Log   []string `bson:"log"`
		}
		if err := admin.RunCommand(ctx, bson.D{{Key: "getLog", Value: "global"}}).Decode(&lg); err != nil || lg.Total == 0 || len(lg.Log) == 0 {
			t.Errorf("getLog global: %d lines of %d, %v", len(lg.Log), lg.Total, err)
		}
		var ce mongo.CommandError
		if err := admin.RunCommand(ctx, bson.D{{Key: "getLog", Value: "nope"}}).Err(); !errors.As(err, &ce) || ce.Code != int32(mongoerr.OperationFailed) {
			t.Errorf("getLog of an unknown log: %v", err)
		}
		// dbStats: every shard's answer under raw, their objects summed.
		var st struct {
			Raw         map[string]bson.Raw `bson:"raw"`
			DB          string              `bson:"db"`
			Objects     int64               `bson:"objects"`
			Collections int64               `bson:"collections"`
			Scale       int64               `bson:"scaleFactor"`
		}
		if err := sc.router.Database("app").RunCommand(ctx, bson.D{{Key: "dbStats", Value: 1}, {Key: "scale", Value: 1024}}).Decode(&st); err != nil {
			t.Fatalf("dbStats: %v", err)
		}
		var want int64
		for id, cl := range sc.shards {
			var one struct {
				Objects int64 `bson:"objects"`
			}
			if err := cl.Database("app").RunCommand(ctx, bson.D{{Key: "dbStats", Value: 1}}).Decode(&one); err != nil {
				t.Fatalf("dbStats on %s: %v", id, err)
			}
			want += one.Objects
		}
		if st.DB != "app" || len(st.Raw) != len(sc.shards) || st.Objects != want || want == 0 || st.Collections < 1 || st.Scale != 1024 {
			t.Errorf("dbStats through the router: db %q, %d raw, %d objects (shards: %d), %d collections, scale %d",
				st.DB, len(st.Raw), st.Objects, want, st.Collections, st.Scale)
		}
		if err := sc.router.Database("app").RunCommand(ctx, bson.D{{Key: "dbStats", Value: 1}, {Key: "scale", Value: 0}}).Err(); !errors.As(err, &ce) || ce.Code != int32(mongoerr.Location51024) {
			t.Errorf("dbStats with scale 0: %v", err)
		}
		// validate: a sharded collection on every owning shard, an unsharded one on its
		// primary shard with that shard's own fields.
		var v struct {
			Valid bool                `bson:"valid"`
			NS    string              `bson:"ns"`
			Raw   map[string]bson.Raw `bson:"raw"`
		}
		if err := sc.router.Database("app").RunCommand(ctx, bson.D{{Key: "validate", Value: "t"}}).Decode(&v); err != nil {
			t.Fatalf("validate app.t: %v", err)
		}
		if _, ok0 := v.Raw["sh0"]; !v.Valid || !ok0 || len(v.Raw) != 2 {
			t.Errorf("validate of the sharded app.t: valid %v, raw %v", v.Valid, v.Raw)
		}
		v.Raw = nil
		if err := sc.router.Database("txnddl").RunCommand(ctx, bson.D{{Key: "validate", Value: "c"}}).Decode(&v); err != nil {
			t.Fatalf("validate txnddl.c: %v", err)
		}
		if !v.Valid || v.NS != "txnddl.c" || len(v.Raw) != 1 {
			t.Errorf("validate of the unsharded txnddl.c: valid %v, ns %q, raw %v", v.Valid, v.NS, v.Raw)
		}
		if err := sc.router.Database("app").RunCommand(ctx, bson.D{{Key: "validate", Value: "nope"}}).Err(); !errors.As(err, &ce) || ce.Code != int32(mongoerr.NamespaceNotFound) {
			t.Errorf("validate of a missing collection: %v", err)
		}
		// currentOp lists the shards' operations (at least each shard's own $currentOp), each
		// with its shard and a "<shard>:<opid>" id; the command's other fields filter them.
		var cur struct {
			Inprog []struct {
				Shard string `bson:"shard"`
				Opid  string `bson:"opid"`
			} `bson:"inprog"`
		}
		if err := admin.RunCommand(ctx, bson.D{{Key: "currentOp", Value: 1}}).Decode(&cur); err != nil {
			t.Fatalf("currentOp: %v", err)
		}
		seen := map[string]string{}
		for _, op := range cur.Inprog {
			if !strings.HasPrefix(op.Opid, op.Shard+":") {
				t.Errorf("currentOp: opid %q of shard %q", op.Opid, op.Shard)
			}
			seen[op.Shard] = op.Opid
		}
		if len(seen) != 2 {
			t.Errorf("currentOp: operations of shards %v, want sh0 and sh1", seen)
		}
		cur.Inprog = nil
		if err := admin.RunCommand(ctx, bson.D{{Key: "currentOp", Value: 1}, {Key: "$all", Value: true}, {Key: "shard", Value: "sh1"}}).Decode(&cur); err != nil {
			t.Fatalf("currentOp filtered: %v", err)
		}
		for _, op := range cur.Inprog {
			if op.Shard != "sh1" {
				t.Errorf("currentOp {shard: sh1}: an operation of %q", op.Shard)
			}
		}
		if len(cur.Inprog) == 0 {
			t.Errorf("currentOp {$all: true, shard: sh1}: nothing")
		}
		var killed struct {
			Info  string `bson:"info"`
			Shard string `bson:"shard"`
		}
		if err := admin.RunCommand(ctx, bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: seen["sh0"]}}).Decode(&killed); err != nil || killed.Shard != "sh0" || killed.Info == "" {
			t.Errorf("killOp %q: %+v %v", seen["sh0"], killed, err)
		}
		if err := admin.RunCommand(ctx, bson.D{{Key: "killOp", Value: 1}, {Key: "op", Value: "sh0"}}).Err(); !errors.As(err, &ce) || ce.Code != int32(mongoerr.FailedToParse) {
			t.Errorf("killOp of an opid without a shard: %v", err)
		}
		if err := admin.RunCommand(ctx, bson.D{{Key: "currentOp", Value: 1}, {Key: "$ownOps", Value: true}}).Err(); !errors.As(err, &ce) || ce.Code != int32(mongoerr.CommandNotSupported) {
			t.Errorf("currentOp $ownOps: %v", err)
		}
		// setParameter changes the router's own parameter; an unknown one changes nothing.
		var was struct {
			Was int32 `bson:"was"`
		}
		if err := admin2.RunCommand(ctx, bson.D{{Key: "setParameter", Value: 1}, {Key: "cursorTimeoutMillis", Value: 123456}}).Decode(&was); err != nil || was.Was != 600000 {
			t.Errorf("setParameter cursorTimeoutMillis: was %d, %v", was.Was, err)
		}
		var got struct {
			V int32 `bson:"cursorTimeoutMillis"`
		}
		if err := admin2.RunCommand(ctx, bson.D{{Key: "getParameter", Value: 1}, {Key: "cursorTimeoutMillis", Value: 1}}).Decode(&got); err != nil || got.V != 123456 {
			t.Errorf("getParameter after setParameter: %d, %v", got.V, err)
		}
		if err := admin2.RunCommand(ctx, bson.D{{Key: "setParameter", Value: 1}, {Key: "noSuchParameter", Value: 1}}).Err(); !errors.As(err, &ce) || ce.Code != int32(mongoerr.InvalidOptions) {
			t.Errorf("setParameter of an unknown parameter: %v", err)
		}
		// shutdown ends the second router cleanly.
		_ = admin2.RunCommand(ctx, bson.D{{Key: "shutdown", Value: 1}}).Err()
		deadline := time.Now().Add(30 * time.Second)
		for r2.Running() {
			if time.Now().After(deadline) {
				t.Fatal("the router did not exit within 30 s of shutdown")
			}
			time.Sleep(50 * time.Millisecond)
		}
		if st := r2.ExitState(); st == nil || st.ExitCode() != 0 {
			t.Errorf("the router's exit after shutdown: %v", st)
		}
	})
}
