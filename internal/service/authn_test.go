package service

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
)

// TestWithSessionOwner: an authenticated user's lsid gets its digest as uid (replacing any
// uid the client sent), so two users naming one session id get two sessions.
func TestWithSessionOwner(t *testing.T) {
	id := make([]byte, 16)
	lsid := bsoncore.NewDocumentBuilder().AppendBinary("id", 4, id).AppendBinary("uid", 0, make([]byte, 32)).Build()
	cmd := bsoncore.NewDocumentBuilder().AppendInt32("find", 1).AppendDocument("lsid", lsid).AppendString("$db", "app").Build()
	alice, bob := auth.UserName{User: "alice", DB: "app"}, auth.UserName{User: "bob", DB: "app"}
	keyOf := func(u auth.UserName) [32]byte {
		out := WithSessionOwner(cmd, &AuthSession{Enabled: true, User: &u})
		k, err := ParseLsid(out.Lookup("lsid"))
		if err != nil {
			t.Fatal(err)
		}
		if k.ID != [16]byte(id) || out.Lookup("$db").StringValue() != "app" {
			t.Fatalf("rewritten command %v", out)
		}
		return k.UID
	}
	if a, b := keyOf(alice), keyOf(bob); a == b || a != UserDigest(alice) {
		t.Errorf("uids: alice %x, bob %x", a, b)
	}
	if got := WithSessionOwner(cmd, &AuthSession{Enabled: true, User: &internalUser}); &got[0] != &cmd[0] {
		t.Error("the internal user's lsid was rewritten")
	}
	if got := WithSessionOwner(cmd, nil); &got[0] != &cmd[0] {
		t.Error("an unauthenticated command was rewritten")
	}
}

func TestRedactSecrets(t *testing.T) {
	cmd := bsoncore.NewDocumentBuilder().AppendString("createUser", "u").AppendString("pwd", "hunter2").
		AppendString("$db", "admin").Build()
	got := RedactSecrets(cmd)
	if v := got.Lookup("pwd").StringValue(); v != "xxx" || got.Lookup("createUser").StringValue() != "u" {
		t.Errorf("redacted: %v", got)
	}
	plain := bsoncore.NewDocumentBuilder().AppendInt32("ping", 1).Build()
	if got := RedactSecrets(plain); &got[0] != &plain[0] {
		t.Error("a command without secrets was copied")
	}
}
