package commands_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/commands"
	"humongo/internal/operation"
	"humongo/internal/server"
	"humongo/internal/service"
)

// With an in-flight budget smaller than one message, concurrent large inserts still all run
// (each alone, none deadlocks waiting for room it can never get) and store every document.
func TestLargeMessagesOverInFlightBudget(t *testing.T) {
	db, err := operation.OpenDB(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mongod := commands.NewMongod(db, service.Config{Params: service.NewParams(commands.DefaultParamSpecs())})
	s, err := server.New(server.Config{Port: 0, State: mongod.State, Registry: mongod.Registry, Role: mongod.Role,
		Closers: []server.Closer{db}, InFlightMessageBytes: 1 << 20})
	if err != nil {
		_ = db.Close()
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { _ = s.Close() })
	cl, err := mongo.Connect(options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", s.Port())).
		SetRetryWrites(false).SetMaxPoolSize(8))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Disconnect(context.Background()) })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const clients, perBatch = 4, 40 // 40 × 64 kB ≈ 2.6 MB per message
	coll := cl.Database("t").Collection("big")
	var wg sync.WaitGroup
	for c := range clients {
		docs := make([]any, perBatch)
		for i := range docs {
			docs[i] = bson.D{{Key: "_id", Value: c*perBatch + i}, {Key: "p", Value: bson.Binary{Data: make([]byte, 64<<10)}}}
		}
		wg.Go(func() {
			if _, err := coll.InsertMany(ctx, docs); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != clients*perBatch {
		t.Fatalf("count = %d, %v; want %d", n, err, clients*perBatch)
	}
}
