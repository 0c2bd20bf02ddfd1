package server

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestShutdownInterruptsRunningCommands: a clean shutdown interrupts a long command at once
// (InterruptedAtShutdown, as mongod's killAllOperations) instead of waiting out the drain
// timeout for it.
func TestShutdownInterruptsRunningCommands(t *testing.T) {
	s := startServer(t)
	cl := connect(t, s)
	mustRun(t, cl, "admin", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "blockConnection", Value: true},
			{Key: "blockTimeMS", Value: 30000}}}})
	errc := make(chan error, 1)
	go func() {
		_, err := runCmd(t, cl, "test", bson.D{{Key: "ping", Value: 1}, {Key: "comment", Value: "long"}})
		errc <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for opsWithComment(t, cl, "long") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("blocked ping never showed in currentOp")
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	took := time.Since(start)
	t.Logf("shutdown took %v with a command running", took)
	if took > 5*time.Second {
		t.Fatalf("shutdown took %v: the running command was not interrupted", took)
	}
	select {
	case err := <-errc:
		t.Logf("the blocked ping ended with %v", err)
		if err == nil {
			t.Fatal("the blocked ping succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked ping did not end with the shutdown")
	}
	// The server is gone: do not let the client's cleanup wait out server selection to end
	// its sessions.
	dctx, dcancel := context.WithTimeout(context.Background(), time.Second)
	defer dcancel()
	_ = cl.Disconnect(dctx)
}
