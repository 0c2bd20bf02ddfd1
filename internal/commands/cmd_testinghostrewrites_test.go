package commands_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"humongo/internal/mongoerr"
)

// hrwCode is the server error code of err (0 if it is not a command error).
func hrwCode(err error) mongoerr.Code {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return mongoerr.Code(ce.Code)
	}
	return 0
}

func TestTestingReplicaSetHostRewrites(t *testing.T) {
	ts, rc := startMember(t, t.TempDir(), 0)
	t.Cleanup(func() {
		rc.Close()
		ts.close(t)
	})
	// A second member in the same process keeps its own map (the Rewriter is per server).
	other, otherRC := startMember(t, t.TempDir(), 0)
	t.Cleanup(func() {
		otherRC.Close()
		other.close(t)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := ts.cl.Database("admin")
	run := func(arg any) (bson.Raw, error) {
		return admin.RunCommand(ctx, bson.D{{Key: "testingReplicaSetHostRewrites", Value: arg}}).Raw()
	}
	// TEST-NET addresses: nothing dials them.
	const from, to = "192.0.2.1:27017", "192.0.2.2:27018"
	rw := rc.HostRewriter()

	// Without enableTestCommands the command does not exist.
	if _, err := run(bson.D{{Key: from, Value: to}}); hrwCode(err) != mongoerr.CommandNotFound {
		t.Fatalf("without enableTestCommands: %v, want CommandNotFound", err)
	}
	if err := ts.params.SetString("enableTestCommands", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(bson.D{{Key: from, Value: to}}); err != nil {
		t.Fatal(err)
	}
	if got := rw.Rewrite(from); got != to {
		t.Fatalf("Rewrite(%s) = %s after the command, want %s", from, got, to)
	}
	if got := otherRC.HostRewriter().Rewrite(from); got != from {
		t.Fatalf("another server's Rewrite(%s) = %s: the map leaked between servers", from, got)
	}

	for _, c := range []struct {
		arg  any
		code mongoerr.Code
	}{
		{1, mongoerr.TypeMismatch},
		{"x", mongoerr.TypeMismatch},
		{bson.D{{Key: from, Value: 5}}, mongoerr.TypeMismatch},
		{bson.D{{Key: from, Value: "nohost"}}, mongoerr.BadValue},
		{bson.D{{Key: "nohost", Value: to}}, mongoerr.BadValue},
		{bson.D{{Key: from, Value: "192.0.2.2:0"}}, mongoerr.BadValue},
		{bson.D{{Key: from, Value: to}, {Key: from, Value: to}}, mongoerr.BadValue},
	} {
		if _, err := run(c.arg); hrwCode(err) != c.code {
			t.Errorf("testingReplicaSetHostRewrites: %v → %v, want %v", c.arg, err, c.code)
		}
	}
	// A rejected request changed nothing.
	if got := rw.Rewrites(); len(got) != 1 || got[from] != to {
		t.Fatalf("rewrites after rejected requests: %v", got)
	}

	// {} clears the map and reports the previous one.
	reply, err := run(bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if was, ok := reply.Lookup("was", from).StringValueOK(); !ok || was != to {
		t.Fatalf("reply %v: want was.%s = %s", reply, from, to)
	}
	if got := rw.Rewrites(); len(got) != 0 {
		t.Fatalf("rewrites after {}: %v", got)
	}
	// Only on admin.
	err = ts.cl.Database("test").RunCommand(ctx, bson.D{{Key: "testingReplicaSetHostRewrites", Value: bson.D{}}}).Err()
	if hrwCode(err) != mongoerr.Unauthorized {
		t.Fatalf("on a non-admin database: %v, want Unauthorized", err)
	}
	// A standalone dials no member: it has no map to change.
	solo := startTestServer(t)
	if err := solo.params.SetString("enableTestCommands", "1"); err != nil {
		t.Fatal(err)
	}
	err = solo.cl.Database("admin").RunCommand(ctx, bson.D{{Key: "testingReplicaSetHostRewrites", Value: bson.D{}}}).Err()
	if hrwCode(err) != mongoerr.NoReplicationEnabled {
		t.Fatalf("on a standalone: %v, want NoReplicationEnabled", err)
	}
}
