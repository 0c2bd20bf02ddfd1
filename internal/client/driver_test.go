package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/client"
	"humongo/internal/commands"
	"humongo/internal/operation"
	"humongo/internal/server"
	"humongo/internal/service"
)

// startMarked starts an in-process humongod holding one document {_id: name} in test.marker,
// so a client can tell which server it reached, and returns its address.
func startMarked(t *testing.T, name string) string {
	t.Helper()
	db, err := operation.OpenDB(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mongod := commands.NewMongod(db, service.Config{})
	s, err := server.New(server.Config{Port: 0, State: mongod.State, Registry: mongod.Registry, Role: mongod.Role,
		Closers: []server.Closer{db}})
	if err != nil {
		_ = db.Close()
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { _ = s.Close() })
	addr := fmt.Sprintf("127.0.0.1:%d", s.Port())
	cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?directConnection=true"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Disconnect(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Database("test").Collection("marker").InsertOne(ctx, bson.D{{Key: "_id", Value: name}}); err != nil {
		t.Fatal(err)
	}
	return addr
}

// The driver, given a Rewriter as its dialer (as every internal client is), reaches the
// rewritten target, and a change of the rewrite moves it at once: its pooled and monitoring
// connections are closed and it reconnects through the new target.
func TestDriverFollowsRewrites(t *testing.T) {
	a, b := startMarked(t, "a"), startMarked(t, "b")
	var r client.Rewriter
	const host = "127.0.0.1:1" // nothing listens there: only a rewrite makes it reachable
	if _, _, err := r.Set(map[string]string{host: a}); err != nil {
		t.Fatal(err)
	}
	cl, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + host + "/?directConnection=true").
		SetDialer(&r).SetServerSelectionTimeout(30 * time.Second).SetRetryReads(false).
		SetHeartbeatInterval(500 * time.Millisecond).SetServerMonitoringMode(options.ServerMonitoringModePoll))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Disconnect(context.Background()) }()
	marker := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var doc struct {
			ID string `bson:"_id"`
		}
		if err := cl.Database("test").Collection("marker").FindOne(ctx, bson.D{}).Decode(&doc); err != nil {
			return "error: " + err.Error()
		}
		return doc.ID
	}
	if got := marker(); got != "a" {
		t.Fatalf("through the rewrite: %s, want a", got)
	}
	_, closed, err := r.Set(map[string]string{host: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the change closed %d connections", closed)
	if closed == 0 {
		t.Fatal("no pooled connection was closed by the change")
	}
	// The first command after the change may fail on a pooled connection the driver had not
	// yet seen closed; none may reach a again.
	start := time.Now()
	for {
		got := marker()
		if got == "b" {
			break
		}
		if got == "a" {
			t.Fatal("a command reached the old target after the change")
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("never reached the new target: %s", got)
		}
	}
	t.Logf("reached the new target %v after the change", time.Since(start).Round(time.Millisecond))
}
