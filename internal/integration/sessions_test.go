package integration

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// TestIntegrationSessionsCollection checks humongod runs the logical session cache's refresh
// on its own, at the period --setParameter logicalSessionRefreshMillis gives: a session
// used by a command lands in config.system.sessions.
func TestIntegrationSessionsCollection(t *testing.T) {
	s := newServer(t, "", "--setParameter", "logicalSessionRefreshMillis=100")
	cl := connect(t, s.uri())
	sess, err := cl.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctxT(t))
	if err := cl.Database("app").Collection("c").FindOne(mongo.NewSessionContext(ctxT(t), sess), bson.D{}).Err(); err != nil &&
		err != mongo.ErrNoDocuments {
		t.Fatal(err)
	}
	_, id, _ := sess.ID().Lookup("id").BinaryOK()
	deadline := time.Now().Add(15 * time.Second)
	for {
		n, err := cl.Database("config").Collection("system.sessions").CountDocuments(ctxT(t),
			bson.D{{Key: "_id.id", Value: bson.Binary{Subtype: 4, Data: id}}})
		if err == nil && n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15s with logicalSessionRefreshMillis=100 the session is not stored (%d, %v)", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
