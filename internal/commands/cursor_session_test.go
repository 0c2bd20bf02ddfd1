package commands_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"regexp"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"humongo/internal/mongoerr"
)

// TestGetMoreOtherSession: a cursor belongs to the session that opened it. A getMore from
// another session fails with MongoDB's 50738 and leaves the cursor usable by its own session;
// a cursor opened without a session cannot be continued in one (50736) nor the reverse
// (50737); killCursors does not check the session.
func TestGetMoreOtherSession(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()
	db := ts.cl.Database("app")
	docs := []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}
	if _, err := db.Collection("c").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	sa, err := ts.cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sa.EndSession(ctx)
	sb, err := ts.cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.EndSession(ctx)
	ctxA, ctxB := mongo.NewSessionContext(ctx, sa), mongo.NewSessionContext(ctx, sb)
	var fr bson.Raw
	if err := db.RunCommand(ctxA, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}}).Decode(&fr); err != nil {
		t.Fatal(err)
	}
	id := fr.Lookup("cursor", "id").Int64()
	getMore := bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "batchSize", Value: 1}}
	err = db.RunCommand(ctxB, getMore).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("getMore from another session: got %v, want 50738", err)
	}
	// MongoDB prints a LogicalSessionId as "id - uid - txnNumber - txnUUID"; without
	// authentication the uid is SHA-256("").
	lsid := `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12} - 47DEQpj8HBSa\+/TImW\+5JCeuQeRkm5NMpJWZG3hSuFU= -  - `
	want := regexp.MustCompile(fmt.Sprintf(`^Cannot run getMore on cursor %d, which was created in session %s, in session %s$`, id, lsid, lsid))
	if ce.Code != 50738 || ce.Name != "Location50738" || !want.MatchString(ce.Message) {
		t.Fatalf("got %d (%s) %q, want 50738 (Location50738) matching %s", ce.Code, ce.Name, ce.Message, want)
	}
	// The cursor is still there for its own session.
	var gr bson.Raw
	if err := db.RunCommand(ctxA, getMore).Decode(&gr); err != nil {
		t.Fatalf("getMore in the cursor's session: %v", err)
	}
	if v := gr.Lookup("cursor", "nextBatch", "0", "_id").Int32(); v != 2 {
		t.Fatalf("getMore returned %v", gr)
	}
	// killCursors from another session kills it (MongoDB does not check the session there).
	var kr bson.Raw
	if err := db.RunCommand(ctxB, bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{id}}}).Decode(&kr); err != nil {
		t.Fatal(err)
	}
	if k, _ := kr.Lookup("cursorsKilled").Array().Values(); len(k) != 1 {
		t.Fatalf("killCursors from another session: %v", kr)
	}

	// Raw OP_MSG, to send commands without an lsid (the driver always attaches one).
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ts.srv.Port()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := &retryRS{conn: conn}
	open := func(lsid bson.D) int64 {
		cmd := bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}}
		if lsid != nil {
			cmd = append(cmd, bson.E{Key: "lsid", Value: lsid})
		}
		return r.must(t, "app", cmd).Lookup("cursor", "id").Int64()
	}
	more := func(id int64, lsid bson.D) bson.Raw {
		cmd := bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}}
		if lsid != nil {
			cmd = append(cmd, bson.E{Key: "lsid", Value: lsid})
		}
		return r.run(t, "app", cmd)
	}
	l1 := newLsid()
	id = open(nil)
	reply := more(id, l1)
	wantErrCode(t, reply, mongoerr.Location50736)
	if msg := reply.Lookup("errmsg").StringValue(); !regexp.MustCompile(fmt.Sprintf(`^Cannot run getMore on cursor %d, which was not created in a session, in session %s$`, id, lsid)).MatchString(msg) {
		t.Errorf("50736 errmsg %q", msg)
	}
	if reply := more(id, nil); reply.Lookup("ok").Double() != 1 {
		t.Fatalf("getMore without a session on a cursor opened without one: %v", reply)
	}
	id = open(l1)
	reply = more(id, nil)
	wantErrCode(t, reply, mongoerr.Location50737)
	if msg := reply.Lookup("errmsg").StringValue(); !regexp.MustCompile(fmt.Sprintf(`^Cannot run getMore on cursor %d, which was created in session %s, without an lsid$`, id, lsid)).MatchString(msg) {
		t.Errorf("50737 errmsg %q", msg)
	}
	// An lsid with the no-user uid spelled out is the same session.
	l1uid := append(bson.D{}, l1...)
	uid, _ := base64Decode("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=")
	l1uid = append(l1uid, bson.E{Key: "uid", Value: bson.Binary{Data: uid}})
	if reply := more(id, l1uid); reply.Lookup("ok").Double() != 1 {
		t.Fatalf("getMore in the cursor's session: %v", reply)
	}
}

func base64Decode(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
