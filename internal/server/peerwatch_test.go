package server

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/wire"
)

// opsWithComment counts the running operations whose command has this comment.
func opsWithComment(t *testing.T, cl *mongo.Client, comment string) int {
	t.Helper()
	r := mustRun(t, cl, "admin", bson.D{{Key: "currentOp", Value: 1}, {Key: "command.comment", Value: comment}})
	ops, _ := r.Lookup("inprog").Array().Values()
	return len(ops)
}

// TestClientDisconnectInterruptsCommand: a command whose client closes the connection is
// interrupted (ClientDisconnect), not left running until it ends on its own.
func TestClientDisconnectInterruptsCommand(t *testing.T) {
	s := startServer(t)
	cl := connect(t, s)
	mustRun(t, cl, "admin", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "blockConnection", Value: true},
			{Key: "blockTimeMS", Value: 20000}}}})
	nc := rawConn(t, s)
	ping := bsoncore.NewDocumentBuilder().AppendInt32("ping", 1).AppendString("comment", "gone").
		AppendString("$db", "admin").Build()
	if _, err := nc.Write(wire.AppendMsg(nil, 1, 0, 0, ping)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for opsWithComment(t, cl, "gone") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("blocked ping never showed in currentOp")
		}
		time.Sleep(20 * time.Millisecond)
	}
	closed := time.Now()
	_ = nc.Close()
	for opsWithComment(t, cl, "gone") != 0 {
		if time.Since(closed) > 2*time.Second {
			t.Fatal("the command of a closed connection still runs after 2 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("operation gone %v after the client closed its connection", time.Since(closed))
}

// TestPipelinedCommandsSurviveWatch: a command that runs long enough to be watched for a
// disconnect must not lose the bytes of the next, pipelined message.
func TestPipelinedCommandsSurviveWatch(t *testing.T) {
	s := startServer(t)
	cl := connect(t, s)
	mustRun(t, cl, "admin", bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "blockConnection", Value: true},
			{Key: "blockTimeMS", Value: 300}}}})
	nc := rawConn(t, s)
	var msgs []byte
	for i := range 3 {
		ping := bsoncore.NewDocumentBuilder().AppendInt32("ping", 1).AppendString("$db", "admin").Build()
		msgs = wire.AppendMsg(msgs, int32(10+i), 0, 0, ping)
	}
	// The first ping blocks past watchAfter; the other two are already in the socket.
	if _, err := nc.Write(msgs); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range 3 {
		reply := readFrame(t, nc)
		body := bsoncore.Document(reply[16+4+1:])
		if ok, _ := body.Lookup("ok").AsFloat64OK(); ok != 1 {
			t.Fatalf("reply %d: %v", i, body)
		}
	}
}
