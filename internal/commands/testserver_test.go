package commands_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/commands"
	"humongo/internal/operation"
	"humongo/internal/server"
	"humongo/internal/service"
)

// testServer is an in-process humongod with storage in dir and a driver client connected to
// it over loopback (no retries, so each test sees exactly one attempt per command).
type testServer struct {
	srv    *server.Server
	db     *operation.DB
	params *service.Params
	cl     *mongo.Client
}

// startServer starts a testServer on an ephemeral port; the caller stops it (close).
func startServer(t testing.TB, dir string) *testServer {
	t.Helper()
	return startServerWith(t, dir, nil)
}

// startServerWith is startServer with beforeStart run on the server before it accepts
// connections (e.g. attaching replication, as humongod does); an error from it fails t.
func startServerWith(t testing.TB, dir string, beforeStart func(*server.Server) error) *testServer {
	t.Helper()
	db, err := operation.OpenDB(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	params := service.NewParams(commands.DefaultParamSpecs())
	mongod := commands.NewMongod(db, service.Config{Params: params})
	s, err := server.New(server.Config{Port: 0, State: mongod.State, Registry: mongod.Registry, Role: mongod.Role, Closers: []server.Closer{db}})
	if err != nil {
		_ = db.Close()
		t.Fatal(err)
	}
	if beforeStart != nil {
		if err := beforeStart(s); err != nil {
			_ = s.Close()
			t.Fatal(err)
		}
	}
	s.Start()
	o := options.Client().ApplyURI(fmt.Sprintf("mongodb://127.0.0.1:%d/?directConnection=true", s.Port())).
		SetServerSelectionTimeout(30 * time.Second).SetRetryReads(false).SetRetryWrites(false)
	cl, err := mongo.Connect(o)
	if err != nil {
		_ = s.Close()
		t.Fatal(err)
	}
	return &testServer{srv: s, db: db, params: params, cl: cl}
}

// close disconnects the client and shuts the server down (closing storage).
func (ts *testServer) close(t testing.TB) {
	_ = ts.cl.Disconnect(context.Background())
	if err := ts.srv.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// startTestServer starts a testServer in a fresh temporary directory, stopped at cleanup.
func startTestServer(t testing.TB) *testServer {
	t.Helper()
	ts := startServer(t, t.TempDir())
	t.Cleanup(func() { ts.close(t) })
	return ts
}
