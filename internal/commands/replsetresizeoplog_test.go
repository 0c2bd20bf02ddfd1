package commands_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/commands"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/repl/coord"
	"humongo/internal/repl/oplog"
	"humongo/internal/server"
	"humongo/internal/service"
)

// startMember starts a testServer in dir as a replica-set member of "rs0" (the coordinator
// attached before the server accepts connections, as humongod does), initiated as a
// single-node set, and waits until it is a writable primary.
func startMember(t *testing.T, dir string, oplogSizeMB int64) (*testServer, *coord.Coordinator) {
	t.Helper()
	var rc *coord.Coordinator
	ts := startServerWith(t, dir, func(s *server.Server) error {
		var err error
		rc, err = commands.AttachReplication(context.Background(), s.State(), s.Registry(), "rs0",
			fmt.Sprintf("127.0.0.1:%d", s.Port()), oplogSizeMB, coord.Options{TickInterval: 20 * time.Millisecond})
		return err
	})
	if _, err := rc.Config(); err != nil {
		if err := rc.Initiate(context.Background(), nil); err != nil {
			rc.Close()
			ts.close(t)
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for !rc.IsWritablePrimary() {
		if time.Now().After(deadline) {
			t.Fatal("single-node set never became writable")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ts, rc
}

func adminCmd(ts *testServer, cmd bson.D) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return ts.cl.Database("admin").RunCommand(ctx, cmd).Err()
}

func oplogMaxSize(t *testing.T, db *operation.DB) int64 {
	t.Helper()
	m, ok := db.Catalog.Latest().ByNS(oplog.NS)
	if !ok {
		t.Fatal("no oplog")
	}
	return db.Engine.OplogMaxSize(m.Ident)
}

// TestReplSetResizeOplog: errors (standalone 76, size below 990 MB or missing arguments 72),
// a resize that takes effect at once and survives a restart, where it wins over --oplogSize
// as mongod's persisted oplog size does.
func TestReplSetResizeOplog(t *testing.T) {
	standalone := startTestServer(t)
	writeWantCode(t, adminCmd(standalone, bson.D{{Key: "replSetResizeOplog", Value: 1}, {Key: "size", Value: 2000.0}}),
		mongoerr.NoReplicationEnabled)

	dir := t.TempDir()
	ts, rc := startMember(t, dir, 0)
	if got := oplogMaxSize(t, ts.db); got != oplog.MinDefaultMaxSize {
		t.Fatalf("initial cap %d, want the default %d", got, oplog.MinDefaultMaxSize)
	}
	for _, tc := range []struct {
		what string
		cmd  bson.D
		code mongoerr.Code
	}{
		{"too small", bson.D{{Key: "size", Value: 100.0}}, mongoerr.InvalidOptions},
		{"too large", bson.D{{Key: "size", Value: 2e9}}, mongoerr.InvalidOptions},
		{"neither size nor retention", nil, mongoerr.InvalidOptions},
		{"negative retention", bson.D{{Key: "minRetentionHours", Value: -1.0}}, mongoerr.InvalidOptions},
		{"size not a number", bson.D{{Key: "size", Value: "big"}}, mongoerr.TypeMismatch},
	} {
		writeWantCode(t, adminCmd(ts, append(bson.D{{Key: "replSetResizeOplog", Value: 1}}, tc.cmd...)), tc.code)
	}
	if err := adminCmd(ts, bson.D{{Key: "replSetResizeOplog", Value: 1}, {Key: "size", Value: 2000.5},
		{Key: "minRetentionHours", Value: 1.5}}); err != nil {
		t.Fatalf("replSetResizeOplog: %v", err)
	}
	want := int64(2000.5 * (1 << 20))
	if got := oplogMaxSize(t, ts.db); got != want {
		t.Fatalf("cap after resize %d, want %d", got, want)
	}
	rc.Close()
	ts.close(t)

	// Restart asking for another --oplogSize: the persisted size wins.
	ts, rc = startMember(t, dir, 5000)
	defer func() {
		rc.Close()
		ts.close(t)
	}()
	if got := oplogMaxSize(t, ts.db); got != want {
		t.Fatalf("cap after restart %d, want the resized %d", got, want)
	}
	var stats bson.M
	if err := ts.cl.Database("local").RunCommand(context.Background(), bson.D{{Key: "collStats", Value: "oplog.rs"}}).Decode(&stats); err != nil {
		t.Fatal(err)
	}
	// rs.printReplicationInfo() needs the real cap: an int64 here (over 2^30 bytes).
	if stats["capped"] != true || stats["maxSize"] != want {
		t.Errorf("collStats local.oplog.rs: capped=%v maxSize=%v (%T), want true %d", stats["capped"], stats["maxSize"], stats["maxSize"], want)
	}
}

// TestSecondaryClassification pins the registry's MongoDB secondaryAllowed classes that
// CheckReplState enforces.
func TestSecondaryClassification(t *testing.T) {
	for name, want := range map[string]service.SecondaryAllowed{
		"find": service.SecondaryOptIn, "aggregate": service.SecondaryOptIn, "count": service.SecondaryOptIn,
		"distinct": service.SecondaryOptIn, "listCollections": service.SecondaryOptIn, "listIndexes": service.SecondaryOptIn,
		"listDatabases": service.SecondaryOptIn, "explain": service.SecondaryOptIn,
		"getMore": service.SecondaryAlways, "hello": service.SecondaryAlways, "ping": service.SecondaryAlways,
		"collStats": service.SecondaryAlways, "dbStats": service.SecondaryAlways, "dataSize": service.SecondaryAlways,
		"replSetGetStatus": service.SecondaryAlways, "replSetResizeOplog": service.SecondaryAlways,
		"insert": service.SecondaryNever, "update": service.SecondaryNever, "delete": service.SecondaryNever,
		"findAndModify": service.SecondaryNever, "create": service.SecondaryNever, "setDefaultRWConcern": service.SecondaryNever,
	} {
		c := commands.NewRegistry().Lookup(name)
		if c == nil {
			t.Errorf("%s is not registered", name)
			continue
		}
		if c.Secondary != want {
			t.Errorf("%s: Secondary = %v, want %v", name, c.Secondary, want)
		}
		if c.SecondaryOk != (want != service.SecondaryNever) {
			t.Errorf("%s: SecondaryOk = %v with Secondary %v", name, c.SecondaryOk, c.Secondary)
		}
	}
	for _, c := range commands.NewRegistry().List() {
		if c.Secondary < service.SecondaryNever || c.Secondary > service.SecondaryAlways {
			t.Errorf("%s: unresolved Secondary %v", c.Name, c.Secondary)
		}
		if c.Writes && c.Secondary != service.SecondaryNever {
			t.Errorf("%s writes but is %v on secondaries", c.Name, c.Secondary)
		}
	}
}
