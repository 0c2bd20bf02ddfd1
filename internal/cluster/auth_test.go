package cluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"humongo/internal/mongoerr"
)

// writeKeyfile writes a fresh keyfile (owner-only, as mongod requires) and returns its path
// and key.
func writeTestKeyfile(t testing.TB) (string, string) {
	t.Helper()
	raw := make([]byte, 90)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	key := base64.StdEncoding.EncodeToString(raw)
	path := filepath.Join(t.TempDir(), "keyfile")
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, key
}

// connectCred connects with cred (the zero credential: unauthenticated).
func connectCred(t testing.TB, uri string, cred options.Credential) *mongo.Client {
	t.Helper()
	o := options.Client().ApplyURI(uri)
	if cred.Username != "" {
		o.SetAuth(cred)
	}
	cl, err := mongo.Connect(o.
		SetServerSelectionTimeout(10 * time.Second).SetConnectTimeout(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = cl.Disconnect(ctx)
	})
	return cl
}

// TestKeyfileReplicaSet: members started with a keyfile authenticate to each other as the
// internal user (the set elects and replicates majority writes), clients must authenticate
// once the first user exists, a peer without the key, or with another key, is refused the
// replication protocol's commands, and a secondary's cached user follows a replicated
// revocation at once.
func TestKeyfileReplicaSet(t *testing.T) {
	t.Parallel()
	// The harness's own keyfile when it runs with authentication (its clients authenticate
	// with it), else one of the test's.
	keyPath, key, err := Keyfile()
	if err != nil {
		t.Fatal(err)
	}
	if !AuthOn() {
		keyPath, key = writeTestKeyfile(t)
	}
	d := Start(t, Topology{Kind: ReplicaSet, Members: 2}, Options{Args: []string{"--keyFile", keyPath}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	primary, err := d.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The localhost exception: the first user, created unauthenticated.
	anon := connectCred(t, primary.URI(), options.Credential{})
	if err := anon.Database("admin").RunCommand(ctx, bson.D{{Key: "createUser", Value: "root"},
		{Key: "pwd", Value: "pw"}, {Key: "roles", Value: bson.A{"root"}}}).Err(); err != nil {
		t.Fatal(err)
	}
	root := connectCred(t, d.URI, options.Credential{Username: "root", Password: "pw"})
	coll := root.Database("app").Collection("c", options.Collection().SetWriteConcern(writeconcern.Majority()))
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatalf("majority insert over authenticated member links: %v", err)
	}

	heartbeat := bson.D{{Key: "replSetHeartbeat", Value: d.Topology.Name}, {Key: "configVersion", Value: 1},
		{Key: "from", Value: "127.0.0.1:1"}, {Key: "fromId", Value: 7}, {Key: "term", Value: 1}}
	wantCode := func(what string, err error, code mongoerr.Code) {
		t.Helper()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != int32(code) {
			t.Errorf("%s: want %s, got %v", what, code.Name(), err)
		}
	}
	// No key: the member refuses the protocol's commands and user commands alike.
	wantCode("heartbeat without authentication", anon.Database("admin").RunCommand(ctx, heartbeat).Err(), mongoerr.Unauthorized)
	wantCode("find without authentication", anon.Database("app").RunCommand(ctx, bson.D{{Key: "find", Value: "c"}}).Err(), mongoerr.Unauthorized)
	// Another key: the internal user does not authenticate.
	_, otherKey := writeTestKeyfile(t)
	internal := func(k string) options.Credential {
		return options.Credential{AuthMechanism: "SCRAM-SHA-256", AuthSource: "local", Username: "__system", Password: k}
	}
	wrong := connectCred(t, primary.URI(), internal(otherKey))
	wantCode("heartbeat with another key", wrong.Database("admin").RunCommand(ctx, heartbeat).Err(), mongoerr.AuthenticationFailed)
	// The key: a member's heartbeat is answered.
	member := connectCred(t, primary.URI(), internal(key))
	if err := member.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Err(); err != nil {
		t.Fatalf("replSetGetStatus as the internal user: %v", err)
	}
	// A user without a role is authenticated but not authorized for the protocol.
	if err := root.Database("admin").RunCommand(ctx, bson.D{{Key: "createUser", Value: "plain"},
		{Key: "pwd", Value: "pw"}, {Key: "roles", Value: bson.A{}}}).Err(); err != nil {
		t.Fatal(err)
	}
	plain := connectCred(t, primary.URI(), options.Credential{Username: "plain", Password: "pw"})
	wantCode("find as a user without roles", plain.Database("app").RunCommand(ctx, bson.D{{Key: "find", Value: "c"}}).Err(), mongoerr.Unauthorized)
	// createUser waits for its write concern: with w: 2 the secondary has the user at once.
	if err := root.Database("admin").RunCommand(ctx, bson.D{{Key: "createUser", Value: "reader"},
		{Key: "pwd", Value: "pw"}, {Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: "read"}, {Key: "db", Value: "app"}}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 2}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	var secondary *Process
	for _, n := range d.Nodes {
		if n != primary {
			secondary = n
		}
	}
	reader := connectCred(t, secondary.URI(), options.Credential{Username: "reader", Password: "pw"})
	if err := reader.Database("app").RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "secondaryPreferred"}}}}).Err(); err != nil {
		t.Fatalf("the w:2 user on the secondary: %v", err)
	}
	// The secondary has cached the reader; a revocation replicated to it (w: 2) drops its
	// cache as the batch applies (not userCacheInvalidationIntervalSecs later): the next
	// read there is refused.
	if err := root.Database("admin").RunCommand(ctx, bson.D{{Key: "revokeRolesFromUser", Value: "reader"},
		{Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: "read"}, {Key: "db", Value: "app"}}}},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 2}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	wantCode("find on the secondary after the revocation", reader.Database("app").RunCommand(ctx, bson.D{{Key: "find", Value: "c"},
		{Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "secondaryPreferred"}}}}).Err(), mongoerr.Unauthorized)
}
