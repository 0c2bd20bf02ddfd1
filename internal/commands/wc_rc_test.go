package commands_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/commands"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/repl/coord"
	"humongo/internal/server"
	"humongo/internal/service"
)

// rsTestServer starts an in-process single-node replica set (initiated, writable primary)
// and returns a directConnection client to it.
func rsTestServer(t *testing.T) (*server.Server, *mongo.Client) {
	return rsTestServerWith(t, nil)
}

// rsTestServerWith initiates the set with cfg(host) (nil: the default one-member config).
func rsTestServerWith(t *testing.T, cfg func(host string) bson.D) (*server.Server, *mongo.Client) {
	t.Helper()
	db, err := operation.OpenDB(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	params := service.NewParams(commands.DefaultParamSpecs())
	mongod := commands.NewMongod(db, service.Config{Params: params})
	s, err := server.New(server.Config{Port: 0, State: mongod.State, Registry: mongod.Registry, Role: mongod.Role, Closers: []server.Closer{db}})
	if err != nil {
		t.Fatal(err)
	}
	host := fmt.Sprintf("127.0.0.1:%d", s.Port())
	rc, err := commands.AttachReplication(context.Background(), s.State(), s.Registry(), "rs0", host, 0,
		coord.Options{TickInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + host + "/?directConnection=true").
		SetServerSelectionTimeout(30 * time.Second).SetRetryWrites(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cl.Disconnect(context.Background())
		rc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	var initArg any = 1
	if cfg != nil {
		initArg = cfg(host)
	}
	if err := cl.Database("admin").RunCommand(context.Background(), bson.D{{Key: "replSetInitiate", Value: initArg}}).Err(); err != nil {
		t.Fatalf("replSetInitiate: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !rc.IsWritablePrimary() {
		if time.Now().After(deadline) {
			t.Fatal("never became writable primary")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s, cl
}

func TestWriteConcernReplicaSet(t *testing.T) {
	_, cl := rsTestServer(t)
	// w: "majority" (and the implicit default) succeed on a one-node set.
	r := writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}, {Key: "wtimeout", Value: 5000}}}})
	if r.Lookup("n").Int32() != 1 || len(r.Lookup("writeConcernError").Value) != 0 {
		t.Fatalf("majority: %v", r)
	}
	r = writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}}}})
	if r.Lookup("n").Int32() != 1 || len(r.Lookup("writeConcernError").Value) != 0 {
		t.Fatalf("default: %v", r)
	}
	// operationTime and $clusterTime on replies.
	if _, _, ok := r.Lookup("operationTime").TimestampOK(); !ok {
		t.Errorf("no operationTime: %v", r)
	}
	ct, ok := r.Lookup("$clusterTime").DocumentOK()
	if !ok {
		t.Fatalf("no $clusterTime: %v", r)
	}
	if sig := ct.Lookup("signature", "hash"); sig.Type != bson.TypeBinary {
		t.Errorf("signature: %v", ct)
	}
	// w: 2 on a one-node set: UnsatisfiableWriteConcern as a writeConcernError, write done.
	r = writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 3}}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 2}, {Key: "wtimeout", Value: 200}}}})
	wce, ok := r.Lookup("writeConcernError").DocumentOK()
	if !ok || r.Lookup("n").Int32() != 1 || r.Lookup("ok").Double() != 1 {
		t.Fatalf("w:2: %v", r)
	}
	if code := wce.Lookup("code").Int32(); code != int32(mongoerr.UnsatisfiableWriteConcern) {
		t.Errorf("w:2 code: %v", wce)
	}
	wcUsed := wce.Lookup("errInfo", "writeConcern").Document()
	if wcUsed.Lookup("w").Int32() != 2 || wcUsed.Lookup("wtimeout").Int32() != 200 || wcUsed.Lookup("provenance").StringValue() != "clientSupplied" {
		t.Errorf("errInfo.writeConcern: %v", wce)
	}
	// Unknown tag mode: UnknownReplWriteConcern 79 after the write.
	r = writeMust(t, cl, bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 3}}}, {Key: "limit", Value: 1}}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "dc2"}}}})
	wce, _ = r.Lookup("writeConcernError").DocumentOK()
	if wce.Lookup("code").Int32() != int32(mongoerr.UnknownReplWriteConcern) || r.Lookup("n").Int32() != 1 {
		t.Errorf("tag: %v", r)
	}
	// Bad w still fails to parse.
	_, err := writeRun(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: -1}}}})
	writeWantCode(t, err, mongoerr.FailedToParse)
	// findAndModify with a failing write concern.
	r = writeMust(t, cl, bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "nope"}}}})
	if _, ok := r.Lookup("writeConcernError").DocumentOK(); !ok || len(r.Lookup("value").Value) == 0 {
		t.Errorf("findAndModify: %v", r)
	}
	// w:0 through the driver still works (reply discarded).
	if _, err := cl.Database("test").Collection("c").InsertOne(context.Background(), bson.D{{Key: "_id", Value: 9}}); err != nil {
		t.Fatalf("insertOne: %v", err)
	}
}

func TestWriteConcernTimeoutShape(t *testing.T) {
	// A second, non-voting member that never answers: this node is primary alone, and w:2
	// can only time out.
	_, cl := rsTestServerWith(t, func(host string) bson.D {
		return bson.D{{Key: "_id", Value: "rs0"}, {Key: "members", Value: bson.A{
			bson.D{{Key: "_id", Value: 0}, {Key: "host", Value: host}},
			bson.D{{Key: "_id", Value: 1}, {Key: "host", Value: "127.0.0.1:1"}, {Key: "votes", Value: 0}, {Key: "priority", Value: 0}},
		}}}
	})
	start := time.Now()
	r := writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 2}, {Key: "wtimeout", Value: 300}}}})
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("replied after %v, before wtimeout", d)
	}
	if r.Lookup("n").Int32() != 1 || r.Lookup("ok").Double() != 1 {
		t.Fatalf("reply: %v", r)
	}
	wce := r.Lookup("writeConcernError").Document()
	if got := strings.Join(writeKeys(wce), ","); got != "code,codeName,errmsg,errInfo" {
		t.Errorf("writeConcernError fields %v", got)
	}
	want := `{"code": {"$numberInt":"64"},"codeName": "WriteConcernFailed","errmsg": "waiting for replication timed out",` +
		`"errInfo": {"wtimeout": true,"writeConcern": {"w": {"$numberInt":"2"},"wtimeout": {"$numberInt":"300"},"provenance": "clientSupplied"}}}`
	if got := wce.String(); got != want {
		t.Errorf("writeConcernError\n got %s\nwant %s", got, want)
	}
	// w: "majority" (one voter) is satisfied by this node alone.
	r = writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}, {Key: "wtimeout", Value: 5000}}}})
	if len(r.Lookup("writeConcernError").Value) != 0 {
		t.Errorf("majority: %v", r)
	}
}

func TestDefaultRWConcern(t *testing.T) {
	_, cl := rsTestServer(t)
	adm := cl.Database("admin")
	r, err := adm.RunCommand(context.Background(), bson.D{{Key: "getDefaultRWConcern", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if r.Lookup("defaultWriteConcern", "w").StringValue() != "majority" || r.Lookup("defaultWriteConcernSource").StringValue() != "implicit" {
		t.Errorf("implicit: %v", r)
	}
	r, err = adm.RunCommand(context.Background(), bson.D{{Key: "setDefaultRWConcern", Value: 1},
		{Key: "defaultWriteConcern", Value: bson.D{{Key: "w", Value: 1}}},
		{Key: "defaultReadConcern", Value: bson.D{{Key: "level", Value: "majority"}}}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if r.Lookup("defaultWriteConcern", "w").Int32() != 1 || r.Lookup("defaultReadConcern", "level").StringValue() != "majority" ||
		r.Lookup("defaultWriteConcernSource").StringValue() != "global" {
		t.Errorf("set: %v", r)
	}
	// The custom default shows in a failing write's errInfo provenance.
	r = writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}},
		{Key: "writeConcern", Value: bson.D{{Key: "wtimeout", Value: 10}}}})
	if len(r.Lookup("writeConcernError").Value) != 0 {
		t.Errorf("w:1 default: %v", r)
	}
	err = adm.RunCommand(context.Background(), bson.D{{Key: "setDefaultRWConcern", Value: 1},
		{Key: "defaultWriteConcern", Value: bson.D{{Key: "w", Value: 0}}}}).Err()
	writeWantCode(t, err, mongoerr.BadValue)
	err = adm.RunCommand(context.Background(), bson.D{{Key: "setDefaultRWConcern", Value: 1}}).Err()
	writeWantCode(t, err, mongoerr.BadValue)
}

func TestReadConcernReplicaSet(t *testing.T) {
	_, cl := rsTestServer(t)
	db := cl.Database("test")
	r := writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}})
	opTime := r.Lookup("operationTime")
	ts, inc := opTime.Timestamp()
	run := func(cmd bson.D) (bson.Raw, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return db.RunCommand(ctx, cmd).Raw()
	}
	count := func(r bson.Raw) int {
		vals, _ := r.Lookup("cursor", "firstBatch").Array().Values()
		return len(vals)
	}
	// majority sees the majority-committed insert.
	r, err := run(bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}}}})
	if err != nil || count(r) != 1 {
		t.Fatalf("majority: %v %v", r, err)
	}
	// afterClusterTime at the write's operationTime.
	r, err = run(bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "local"},
		{Key: "afterClusterTime", Value: bson.Timestamp{T: ts, I: inc}}}}})
	if err != nil || count(r) != 1 {
		t.Fatalf("afterClusterTime: %v %v", r, err)
	}
	// afterClusterTime beyond the cluster time: InvalidOptions.
	_, err = run(bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{
		{Key: "afterClusterTime", Value: bson.Timestamp{T: ts + 1000, I: 1}}}}})
	writeWantCode(t, err, mongoerr.InvalidOptions)
	// snapshot without atClusterTime returns the one it chose; reading at it again works.
	r, err = run(bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}})
	if err != nil || count(r) != 1 {
		t.Fatalf("snapshot: %v %v", r, err)
	}
	if _, _, ok := r.Lookup("cursor", "atClusterTime").TimestampOK(); !ok {
		t.Fatalf("no atClusterTime: %v", r)
	}
	// A later insert is invisible at the earlier atClusterTime.
	atT, atI := r.Lookup("cursor", "atClusterTime").Timestamp()
	writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}}}})
	r, err = run(bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"},
		{Key: "atClusterTime", Value: bson.Timestamp{T: atT, I: atI}}}}})
	if err != nil || count(r) != 1 {
		t.Fatalf("atClusterTime: %v %v", r, err)
	}
	// Too old: SnapshotTooOld.
	_, err = run(bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"},
		{Key: "atClusterTime", Value: bson.Timestamp{T: 1, I: 1}}}}})
	writeWantCode(t, err, mongoerr.SnapshotTooOld)
	// linearizable on the primary; count and distinct take readConcern too.
	r, err = run(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 2}}},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "linearizable"}}}})
	if err != nil || count(r) != 1 {
		t.Fatalf("linearizable: %v %v", r, err)
	}
	r, err = run(bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 1}}}}},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}}}})
	if err != nil || r.Lookup("n").AsInt64() < 1 {
		t.Fatalf("count majority: %v %v", r, err)
	}
	r, err = run(bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{}},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: bson.Timestamp{T: atT, I: atI}}}}})
	if err != nil || count(r) != 1 {
		t.Fatalf("aggregate atClusterTime: %v %v", r, err)
	}
	// distinct at snapshot reports the time it read at in the reply (no cursor): a driver's
	// snapshot session takes its time from there.
	r, err = run(bson.D{{Key: "distinct", Value: "c"}, {Key: "key", Value: "_id"},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}})
	if err != nil {
		t.Fatalf("distinct snapshot: %v", err)
	}
	if _, _, ok := r.Lookup("atClusterTime").TimestampOK(); !ok {
		t.Fatalf("distinct snapshot without atClusterTime: %v", r)
	}
	// $clusterTime gossip: a reply's cluster time is at least what the client sent.
	if _, _, ok := r.Lookup("$clusterTime", "clusterTime").TimestampOK(); !ok {
		t.Errorf("aggregate reply without $clusterTime: %v", r)
	}
}

func TestReadWriteConcernStandalone(t *testing.T) {
	_, cl := writeTestServer(t)
	db := cl.Database("test")
	writeMust(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}})
	ctx := context.Background()
	r, err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}}}}).Raw()
	if err != nil {
		t.Fatalf("majority on standalone: %v", err)
	}
	if len(r.Lookup("operationTime").Value) != 0 || len(r.Lookup("$clusterTime").Value) != 0 {
		t.Errorf("standalone reply has cluster time: %v", r)
	}
	for _, c := range []struct {
		rc   bson.D
		code mongoerr.Code
	}{
		{bson.D{{Key: "level", Value: "snapshot"}}, mongoerr.NotAReplicaSet},
		{bson.D{{Key: "level", Value: "linearizable"}}, mongoerr.NotAReplicaSet},
		{bson.D{{Key: "level", Value: "bogus"}}, mongoerr.BadValue},
		{bson.D{{Key: "level", Value: 1}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "afterClusterTime", Value: bson.Timestamp{T: 1, I: 1}}}, mongoerr.IllegalOperation},
		{bson.D{{Key: "level", Value: "local"}, {Key: "atClusterTime", Value: bson.Timestamp{T: 1, I: 1}}}, mongoerr.InvalidOptions},
		{bson.D{{Key: "afterClusterTime", Value: bson.Timestamp{}}}, mongoerr.InvalidOptions},
		{bson.D{{Key: "nope", Value: 1}}, mongoerr.Location40415},
	} {
		err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: c.rc}}).Err()
		writeWantCode(t, err, c.code)
	}
	err = cl.Database("admin").RunCommand(ctx, bson.D{{Key: "getDefaultRWConcern", Value: 1}}).Err()
	writeWantCode(t, err, mongoerr.Location51300)
	for _, c := range []struct {
		wc   bson.D
		code mongoerr.Code
	}{
		{bson.D{{Key: "w", Value: -1}}, mongoerr.FailedToParse},
		{bson.D{{Key: "w", Value: 51}}, mongoerr.FailedToParse},
		{bson.D{{Key: "w", Value: true}}, mongoerr.FailedToParse},
		{bson.D{{Key: "w", Value: 2}}, mongoerr.BadValue},
		{bson.D{{Key: "w", Value: "dc"}}, mongoerr.BadValue},
		{bson.D{{Key: "j", Value: "x"}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "wtimeout", Value: "x"}}, mongoerr.TypeMismatch},
		{bson.D{{Key: "j", Value: true}, {Key: "fsync", Value: true}}, mongoerr.FailedToParse},
	} {
		_, err := writeRun(t, cl, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}, {Key: "writeConcern", Value: c.wc}})
		writeWantCode(t, err, c.code)
	}
}
