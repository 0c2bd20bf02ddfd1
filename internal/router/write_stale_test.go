package router

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/server"
	"humongo/internal/service"
	"humongo/internal/sharding/routing"
)

// staleShard is a fake single-member replica set "rs0" whose insert answers its first
// statement StaleConfig (as a write error, as mongod reports it) the first staleTimes times,
// then inserts nothing but acknowledges every document; it records the batches it got.
type staleShard struct {
	mu         sync.Mutex
	host       string
	staleTimes int
	// notPrimaryTimes: the next inserts fail as a whole with NotWritablePrimary.
	notPrimaryTimes int
	wanted          routing.ChunkVersion
	batches         [][]bsoncore.Document
}

func startStaleShard(t *testing.T, staleTimes int, wanted routing.ChunkVersion) *staleShard {
	t.Helper()
	fs := &staleShard{staleTimes: staleTimes, wanted: wanted}
	reg := service.NewRegistry()
	reg.Register(&service.Command{Name: "hello", Aliases: []string{"isMaster", "ismaster"}, Secondary: service.SecondaryAlways,
		AllowedOnOpQuery: true, Handler: func(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
			idx, b := bsoncore.AppendDocumentStart(nil)
			b = bsoncore.AppendBooleanElement(b, "isWritablePrimary", true)
			b = bsoncore.AppendBooleanElement(b, "ismaster", true)
			b = bsoncore.AppendStringElement(b, "setName", "rs0")
			b = bsoncore.AppendInt32Element(b, "setVersion", 1)
			b = bsoncore.AppendStringElement(b, "me", fs.host)
			b = bsoncore.AppendStringElement(b, "primary", fs.host)
			b = bsoncore.AppendArrayElement(b, "hosts", bsoncore.NewArrayBuilder().AppendString(fs.host).Build())
			b = service.AppendHelloLimits(ctx, b, env, cmd)
			b, _ = bsoncore.AppendDocumentEnd(b, idx)
			return b, nil
		}})
	reg.Register(service.PingCommand())
	reg.Register(&service.Command{Name: "insert", Secondary: service.SecondaryNever, Handler: fs.insert})
	st := service.NewState(service.Config{Params: service.NewParams(ParamSpecs())})
	s, err := server.New(server.Config{Name: "fakeshard", State: st, Registry: reg, Role: Role{}})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	fs.host = fmt.Sprintf("127.0.0.1:%d", s.Port())
	return fs
}

func (fs *staleShard) insert(_ context.Context, _ *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	arr, _ := cmd.Lookup("documents").ArrayOK()
	vals, _ := arr.Values()
	var docs []bsoncore.Document
	for _, v := range vals {
		docs = append(docs, v.Document())
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.batches = append(fs.batches, docs)
	if fs.notPrimaryTimes > 0 {
		fs.notPrimaryTimes--
		return nil, mongoerr.New(mongoerr.NotWritablePrimary, "not primary")
	}
	if fs.staleTimes > 0 {
		fs.staleTimes--
		errInfo := mustDoc(bson.D{{Key: "ns", Value: "app.s"}, {Key: "vReceived", Value: bson.Raw(cmd.Lookup("shardVersion").Document())},
			{Key: "vWanted", Value: bson.Raw(fs.wanted.ShardVersionDoc())}, {Key: "shardId", Value: "shard0"}})
		we := mustDoc(bson.D{{Key: "index", Value: int32(0)}, {Key: "code", Value: int32(mongoerr.StaleConfig)},
			{Key: "errmsg", Value: "placement version mismatch detected for app.s"}, {Key: "errInfo", Value: bson.Raw(errInfo)}})
		// As mongod: a stale error stops the batch, ordered or not, and is repeated for the
		// statements after it.
		ab := bsoncore.NewArrayBuilder()
		for i := range docs {
			e := we
			if i > 0 {
				e = mustDoc(bson.D{{Key: "index", Value: int32(i)}, {Key: "code", Value: int32(mongoerr.StaleConfig)},
					{Key: "errmsg", Value: "placement version mismatch detected for app.s"}, {Key: "errInfo", Value: bson.Raw(errInfo)}})
			}
			ab.AppendDocument(e)
		}
		return bsoncore.NewDocumentBuilder().AppendInt32("n", 0).AppendArray("writeErrors", ab.Build()).Build(), nil
	}
	return bsoncore.NewDocumentBuilder().AppendInt32("n", int32(len(docs))).Build(), nil
}

// A shard answering StaleConfig makes the router refresh and send again only the statements
// it did not run; the statements the other shard ran are not sent twice; the client never
// sees the error.
func TestRouterStaleRetry(t *testing.T) {
	sc := startShardedCluster(t)
	ctx := context.Background()
	fs := startStaleShard(t, 2, routing.ChunkVersion{Major: 1, Generation: sc.coll.Gen})
	// shard0 is now the fake: its documents of app.s answer stale twice.
	if _, err := sc.config.Collection("shards").UpdateOne(ctx, bson.D{{Key: "_id", Value: "shard0"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "host", Value: "rs0/" + fs.host}}}}); err != nil {
		t.Fatal(err)
	}
	if err := sc.rc.Shards.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	docs := bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: -1}}, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: 1}},
		bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: -3}}}
	r := decodeWrite(t, sc.run(t, "app", bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: docs}, {Key: "ordered", Value: false}}))
	if r.N != 3 || len(r.WriteErrors) != 0 {
		t.Fatalf("insert through a stale shard: %+v", r)
	}
	fs.mu.Lock()
	batches := fs.batches
	fs.mu.Unlock()
	if len(batches) != 3 || len(batches[0]) != 2 || len(batches[2]) != 2 {
		t.Fatalf("the stale shard got %d batches: %v", len(batches), batches)
	}
	if got := sc.ids(t, 1, "app", "s"); len(got) != 1 || got[0] != 2 {
		t.Fatalf("shard1 holds %v: a statement it ran was sent again or lost", got)
	}
	// A shard that stays stale: after maxStaleRetries the statements fail with its error.
	fs.mu.Lock()
	fs.staleTimes, fs.batches = 1000, nil
	fs.mu.Unlock()
	r = decodeWrite(t, sc.run(t, "app", bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 9}, {Key: "k", Value: -9}}}}}))
	if r.N != 0 || len(r.WriteErrors) != 1 || r.WriteErrors[0].Code != int32(mongoerr.StaleConfig) {
		t.Fatalf("endlessly stale shard: %+v", r)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.batches) != maxStaleRetries+1 {
		t.Fatalf("endlessly stale shard was tried %d times, want %d", len(fs.batches), maxStaleRetries+1)
	}
}

// A retryable write answered NotWritablePrimary is sent again (MongoDB's
// RetryPolicy::kIdempotent), at most 3 times; any other write reports the error.
func TestRouterRetryNotPrimary(t *testing.T) {
	sc := startShardedCluster(t)
	ctx := context.Background()
	fs := startStaleShard(t, 0, routing.ChunkVersion{})
	if _, err := sc.config.Collection("shards").UpdateOne(ctx, bson.D{{Key: "_id", Value: "shard0"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "host", Value: "rs0/" + fs.host}}}}); err != nil {
		t.Fatal(err)
	}
	if err := sc.rc.Shards.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}
	insert := func(txn any) writeReply {
		cmd := bson.D{{Key: "insert", Value: "s"}, {Key: "documents", Value: bson.A{bson.D{{Key: "k", Value: -1}}}}}
		if txn != nil {
			cmd = append(cmd, bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: txn})
		}
		return decodeWrite(t, sc.run(t, "app", cmd))
	}
	attempts := func() int {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		n := len(fs.batches)
		fs.batches = nil
		return n
	}
	fs.mu.Lock()
	fs.notPrimaryTimes = 2
	fs.mu.Unlock()
	if r := insert(int64(1)); r.N != 1 || len(r.WriteErrors) != 0 || attempts() != 3 {
		t.Fatalf("retryable insert after two NotWritablePrimary: %+v", r)
	}
	fs.mu.Lock()
	fs.notPrimaryTimes = 100
	fs.mu.Unlock()
	if r := insert(int64(2)); len(r.WriteErrors) != 1 || r.WriteErrors[0].Code != int32(mongoerr.NotWritablePrimary) || attempts() != maxFailedHostRetries+1 {
		t.Fatalf("retryable insert with a primary that never comes back: %+v", r)
	}
	fs.mu.Lock()
	fs.notPrimaryTimes = 1
	fs.mu.Unlock()
	if r := insert(nil); len(r.WriteErrors) != 1 || r.WriteErrors[0].Code != int32(mongoerr.NotWritablePrimary) || attempts() != 1 {
		t.Fatalf("plain insert answered NotWritablePrimary: %+v", r)
	}
}
