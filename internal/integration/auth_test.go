package integration

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/mongoerr"
)

// connectAs returns a client authenticating as user on admin with mech ("" lets the driver
// choose from saslSupportedMechs).
func connectAs(t *testing.T, s *server, user, pwd, mech, source string) *mongo.Client {
	t.Helper()
	cl, err := mongo.Connect(clientOptions(s.uri()).SetAuth(options.Credential{
		AuthMechanism: mech, AuthSource: source, Username: user, Password: pwd}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Disconnect(context.Background()) })
	return cl
}

// TestAuthSCRAM runs a server with --auth: the localhost exception creates the first user,
// then only authenticated users run commands, each within its roles; SCRAM-SHA-1 and
// SCRAM-SHA-256 both authenticate, a wrong password does not.
func TestAuthSCRAM(t *testing.T) {
	t.Parallel()
	s := newServer(t, "", "--auth")
	anon := connect(t, s.uri())
	admin := anon.Database("admin")
	// The localhost exception: no user exists yet.
	run(t, admin, bson.D{{Key: "createUser", Value: "root"}, {Key: "pwd", Value: "rootpw"},
		{Key: "roles", Value: bson.A{"root"}}})
	// It is over once a user exists.
	ce := runErr(t, anon.Database("app"), bson.D{{Key: "find", Value: "c"}}, mongoerr.Unauthorized)
	if !strings.Contains(ce.Message, "requires authentication") {
		t.Errorf("unauthenticated find: %q", ce.Message)
	}
	run(t, admin, bson.D{{Key: "ping", Value: 1}})

	for _, mech := range []string{"SCRAM-SHA-1", "SCRAM-SHA-256", ""} {
		cl := connectAs(t, s, "root", "rootpw", mech, "admin")
		if _, err := cl.Database("app").Collection("c").InsertOne(context.Background(), bson.D{{Key: "x", Value: mech}}); err != nil {
			t.Fatalf("%q: insert as root: %v", mech, err)
		}
	}
	bad := connectAs(t, s, "root", "wrong", "SCRAM-SHA-256", "admin")
	err := bad.Ping(context.Background(), nil)
	var ce2 mongo.CommandError
	if !errors.As(err, &ce2) || ce2.Code != int32(mongoerr.AuthenticationFailed) {
		t.Fatalf("wrong password: %v", err)
	}
	unknown := connectAs(t, s, "nobody", "x", "SCRAM-SHA-256", "admin")
	if err := unknown.Ping(context.Background(), nil); !errors.As(err, &ce2) || ce2.Code != int32(mongoerr.AuthenticationFailed) ||
		strings.Contains(ce2.Message, "nobody") {
		t.Fatalf("unknown user: %v", err)
	}

	root := connectAs(t, s, "root", "rootpw", "", "admin")
	rootAdmin := root.Database("admin")
	// Failed logins are counted: received exceeds successful.
	ss := run(t, rootAdmin, bson.D{{Key: "serverStatus", Value: 1}})
	sha256 := ss.Lookup("security", "authentication", "mechanisms", "SCRAM-SHA-256", "authenticate")
	if rec, ok := sha256.Document().Lookup("received").AsInt64OK(); !ok || rec < 3 ||
		rec <= sha256.Document().Lookup("successful").AsInt64() {
		t.Errorf("serverStatus security: %v", sha256)
	}
	run(t, root.Database("app"), bson.D{{Key: "createUser", Value: "reader"}, {Key: "pwd", Value: "r"},
		{Key: "roles", Value: bson.A{"read"}}})
	runErr(t, root.Database("app"), bson.D{{Key: "createUser", Value: "reader"}, {Key: "pwd", Value: "r"},
		{Key: "roles", Value: bson.A{}}}, mongoerr.Location51003)
	runErr(t, root.Database("app"), bson.D{{Key: "createUser", Value: "x"}, {Key: "pwd", Value: "r"},
		{Key: "roles", Value: bson.A{"nosuchrole"}}}, mongoerr.RoleNotFound)

	reader := connectAs(t, s, "reader", "r", "SCRAM-SHA-256", "app")
	app := reader.Database("app")
	if n, err := app.Collection("c").CountDocuments(context.Background(), bson.D{}); err != nil || n != 3 {
		t.Fatalf("reader count: %d %v", n, err)
	}
	ce = runErr(t, app, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}}, mongoerr.Unauthorized)
	if !strings.Contains(ce.Message, "not authorized on app to execute command") {
		t.Errorf("reader insert: %q", ce.Message)
	}
	runErr(t, reader.Database("other"), bson.D{{Key: "find", Value: "c"}}, mongoerr.Unauthorized)
	runErr(t, reader.Database("admin"), bson.D{{Key: "shutdown", Value: 1}}, mongoerr.Unauthorized)

	st := run(t, app, bson.D{{Key: "connectionStatus", Value: 1}})
	if got := fmt.Sprint(st.Lookup("authInfo", "authenticatedUsers")); !strings.Contains(got, `"reader"`) ||
		!strings.Contains(fmt.Sprint(st.Lookup("authInfo", "authenticatedUserRoles")), `"read"`) {
		t.Errorf("connectionStatus: %v", st)
	}
	// hello names the user's mechanisms.
	h := run(t, rootAdmin, bson.D{{Key: "hello", Value: 1}, {Key: "saslSupportedMechs", Value: "app.reader"}})
	if got := fmt.Sprint(h.Lookup("saslSupportedMechs")); !strings.Contains(got, "SCRAM-SHA-256") || !strings.Contains(got, "SCRAM-SHA-1") {
		t.Errorf("saslSupportedMechs: %v", got)
	}
	ui := run(t, root.Database("app"), bson.D{{Key: "usersInfo", Value: "reader"}})
	if strings.Contains(ui.String(), "storedKey") || !strings.Contains(ui.String(), "mechanisms") {
		t.Errorf("usersInfo: %v", ui)
	}
	ui = run(t, root.Database("app"), bson.D{{Key: "usersInfo", Value: "reader"}, {Key: "showCredentials", Value: true}})
	if !strings.Contains(ui.String(), "storedKey") {
		t.Errorf("usersInfo showCredentials: %v", ui)
	}

	// A grant takes effect on the reader's open connection; a drop ends its access.
	run(t, root.Database("app"), bson.D{{Key: "grantRolesToUser", Value: "reader"}, {Key: "roles", Value: bson.A{"readWrite"}}})
	run(t, app, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}})
	run(t, root.Database("app"), bson.D{{Key: "dropUser", Value: "reader"}})
	runErr(t, app, bson.D{{Key: "find", Value: "c"}}, mongoerr.Unauthorized)
	again := connectAs(t, s, "reader", "r", "SCRAM-SHA-256", "app")
	if err := again.Ping(context.Background(), nil); !errors.As(err, &ce2) || ce2.Code != int32(mongoerr.AuthenticationFailed) {
		t.Fatalf("dropped user: %v", err)
	}
}

// TestAuthBadSASL drives saslStart/saslContinue by hand on one connection: unknown
// mechanisms, a continue without a start or with another conversation id, a tampered nonce,
// a wrong proof and a replayed final message are refused with MongoDB's codes, and none of
// them authenticates the connection.
func TestAuthBadSASL(t *testing.T) {
	t.Parallel()
	s := newServer(t, "", "--auth")
	setup := connect(t, s.uri())
	run(t, setup.Database("admin"), bson.D{{Key: "createUser", Value: "u"}, {Key: "pwd", Value: "pw"},
		{Key: "roles", Value: bson.A{"root"}}})
	cl, err := mongo.Connect(clientOptions(s.uri()).SetMaxPoolSize(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Disconnect(context.Background()) })
	admin := cl.Database("admin")
	bin := func(s string) bson.Binary { return bson.Binary{Subtype: 0, Data: []byte(s)} }
	start := func(first string) bson.Raw {
		return run(t, admin, bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: "SCRAM-SHA-256"},
			{Key: "payload", Value: bin(first)}, {Key: "autoAuthorize", Value: 1}})
	}
	cont := func(id int32, msg string) bson.D {
		return bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: id}, {Key: "payload", Value: bin(msg)}}
	}
	authenticated := func() bool {
		st := run(t, admin, bson.D{{Key: "connectionStatus", Value: 1}})
		users, _ := st.Lookup("authInfo", "authenticatedUsers").Array().Values()
		return len(users) > 0
	}

	runErr(t, admin, bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: "PLAIN"},
		{Key: "payload", Value: bin("\x00u\x00pw")}}, mongoerr.MechanismUnavailable)
	runErr(t, admin, bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: "SCRAM-SHA-256"},
		{Key: "payload", Value: 5}}, mongoerr.TypeMismatch)
	runErr(t, admin, cont(1, "c=biws,r=x,p=eA=="), mongoerr.ProtocolError)
	runErr(t, admin, bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: "SCRAM-SHA-256"},
		{Key: "payload", Value: bin("garbage")}}, mongoerr.AuthenticationFailed)

	// A real conversation's messages, computed with the driver's SCRAM client library.
	conv := newSCRAMClient(t, "u", "pw")
	first, _ := conv.Step("")
	r := start(first)
	id := r.Lookup("conversationId").Int32()
	_, serverFirst := r.Lookup("payload").Binary()
	final, err := conv.Step(string(serverFirst))
	if err != nil {
		t.Fatal(err)
	}
	// Another conversation id ends the conversation.
	runErr(t, admin, cont(id+1, final), mongoerr.ProtocolError)
	runErr(t, admin, cont(id, final), mongoerr.ProtocolError)
	// A tampered nonce.
	conv = newSCRAMClient(t, "u", "pw")
	first, _ = conv.Step("")
	r = start(first)
	_, serverFirst = r.Lookup("payload").Binary()
	final, _ = conv.Step(string(serverFirst))
	runErr(t, admin, cont(r.Lookup("conversationId").Int32(), strings.Replace(final, "r=", "r=X", 1)), mongoerr.AuthenticationFailed)
	// A wrong password's proof.
	conv = newSCRAMClient(t, "u", "wrong")
	first, _ = conv.Step("")
	r = start(first)
	_, serverFirst = r.Lookup("payload").Binary()
	final, _ = conv.Step(string(serverFirst))
	runErr(t, admin, cont(r.Lookup("conversationId").Int32(), final), mongoerr.AuthenticationFailed)
	if authenticated() {
		t.Fatal("a failed conversation authenticated the connection")
	}
	// The right proof authenticates (without skipEmptyExchange, after one empty exchange);
	// replaying it afterwards finds no conversation.
	conv = newSCRAMClient(t, "u", "pw")
	first, _ = conv.Step("")
	r = start(first)
	id = r.Lookup("conversationId").Int32()
	_, serverFirst = r.Lookup("payload").Binary()
	final, _ = conv.Step(string(serverFirst))
	r = run(t, admin, cont(id, final))
	if r.Lookup("done").Boolean() {
		t.Fatalf("done before the empty exchange: %v", r)
	}
	r = run(t, admin, cont(id, ""))
	if !r.Lookup("done").Boolean() || !authenticated() {
		t.Fatalf("the empty exchange did not end the conversation: %v", r)
	}
	runErr(t, admin, cont(id, final), mongoerr.ProtocolError)
	// Another user on an authenticated connection.
	runErr(t, admin, bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: "SCRAM-SHA-256"},
		{Key: "payload", Value: bin("n,,n=other,r=abcdefghijklmnopqrstuvwx")}}, mongoerr.Location5626701)
}

// TestAuthSessionOwnership: a session id is per user. Two users naming the same lsid have two
// sessions: the other user's killSessions leaves a cursor of the session alone; its owner's
// ends it, and naming the owner's uid needs killAnySession; $listLocalSessions lists one's
// own unless asked for others' with the privilege.
func TestAuthSessionOwnership(t *testing.T) {
	t.Parallel()
	s := newServer(t, "", "--auth")
	run(t, connect(t, s.uri()).Database("admin"), bson.D{{Key: "createUser", Value: "root"},
		{Key: "pwd", Value: "pw"}, {Key: "roles", Value: bson.A{"root"}}})
	root := connectAs(t, s, "root", "pw", "", "admin")
	for _, u := range []string{"alice", "bob"} {
		run(t, root.Database("app"), bson.D{{Key: "createUser", Value: u}, {Key: "pwd", Value: "pw"},
			{Key: "roles", Value: bson.A{"readWrite"}}})
	}
	if _, err := root.Database("app").Collection("c").InsertMany(context.Background(),
		[]any{bson.D{{Key: "x", Value: 1}}, bson.D{{Key: "x", Value: 2}}, bson.D{{Key: "x", Value: 3}}}); err != nil {
		t.Fatal(err)
	}
	alice := connectAs(t, s, "alice", "pw", "", "app").Database("app")
	bob := connectAs(t, s, "bob", "pw", "", "app").Database("app")
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}}}
	r := run(t, alice, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}, {Key: "lsid", Value: lsid}})
	id := r.Lookup("cursor", "id").Int64()
	getMore := bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "batchSize", Value: 1}, {Key: "lsid", Value: lsid}}
	run(t, bob, bson.D{{Key: "killSessions", Value: bson.A{lsid}}})
	run(t, alice, getMore)
	run(t, alice, bson.D{{Key: "killSessions", Value: bson.A{lsid}}})
	runErr(t, alice, getMore, mongoerr.CursorNotFound)

	// $listLocalSessions lists the caller's own sessions; another user's, or all, need the
	// listSessions privilege.
	run(t, alice, bson.D{{Key: "find", Value: "c"}, {Key: "lsid", Value: lsid}})
	run(t, bob, bson.D{{Key: "find", Value: "c"}, {Key: "lsid", Value: lsid}})
	digest := func(user string) []byte { d := sha256.Sum256([]byte(user)); return d[:] }
	list := func(db *mongo.Database, spec bson.D) (owners map[string]int) {
		t.Helper()
		cur, err := db.Aggregate(context.Background(), bson.A{bson.D{{Key: "$listLocalSessions", Value: spec}}})
		if err != nil {
			t.Fatalf("$listLocalSessions %v: %v", spec, err)
		}
		var docs []bson.Raw
		if err := cur.All(context.Background(), &docs); err != nil {
			t.Fatal(err)
		}
		owners = map[string]int{}
		for _, d := range docs {
			_, uid := d.Lookup("_id", "uid").Binary()
			for _, u := range []string{"alice@app", "bob@app", "root@admin", ""} {
				if string(uid) == string(digest(u)) {
					owners[u]++
				}
			}
		}
		if n := owners["alice@app"] + owners["bob@app"] + owners["root@admin"] + owners[""]; n != len(docs) {
			t.Errorf("$listLocalSessions %v: %d sessions of unknown users in %v", spec, len(docs)-n, docs)
		}
		return owners
	}
	if got := list(alice, bson.D{}); got["alice@app"] == 0 || len(got) != 1 {
		t.Errorf("alice's own sessions: %v, want only alice's", got)
	}
	if got := list(root.Database("admin"), bson.D{{Key: "allUsers", Value: true}}); got["alice@app"] == 0 || got["bob@app"] == 0 {
		t.Errorf("root's allUsers: %v, want alice's and bob's", got)
	}
	if got := list(root.Database("admin"), bson.D{{Key: "users", Value: bson.A{bson.D{{Key: "user", Value: "bob"}, {Key: "db", Value: "app"}}}}}); got["bob@app"] == 0 || len(got) != 1 {
		t.Errorf("root's list of bob's sessions: %v, want only bob's", got)
	}
	agg := func(spec bson.D) bson.D {
		return bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$listLocalSessions", Value: spec}}}},
			{Key: "cursor", Value: bson.D{}}}
	}
	runErr(t, bob, agg(bson.D{{Key: "allUsers", Value: true}}), mongoerr.Unauthorized)
	runErr(t, bob, agg(bson.D{{Key: "users", Value: bson.A{bson.D{{Key: "user", Value: "alice"}, {Key: "db", Value: "app"}}}}}), mongoerr.Unauthorized)
	runErr(t, root.Database("admin"), agg(bson.D{{Key: "allUsers", Value: true},
		{Key: "users", Value: bson.A{bson.D{{Key: "user", Value: "bob"}, {Key: "db", Value: "app"}}}}}), mongoerr.UnsupportedFormat)
	runErr(t, root.Database("admin"), agg(bson.D{{Key: "users", Value: bson.A{bson.D{{Key: "user", Value: "bob"}}}}}), mongoerr.Location40414)

	// Naming another user's uid is refused, unless killSessions is run with killAnySession.
	r = run(t, alice, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}, {Key: "lsid", Value: lsid}})
	id = r.Lookup("cursor", "id").Int64()
	getMore = bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "batchSize", Value: 1}, {Key: "lsid", Value: lsid}}
	alicesLsid := append(bson.D{}, lsid[0], bson.E{Key: "uid", Value: bson.Binary{Subtype: 0, Data: digest("alice@app")}})
	for _, cmd := range []string{"killSessions", "endSessions", "refreshSessions"} {
		runErr(t, bob, bson.D{{Key: cmd, Value: bson.A{alicesLsid}}}, mongoerr.Unauthorized)
	}
	run(t, alice, getMore)
	run(t, root.Database("admin"), bson.D{{Key: "killSessions", Value: bson.A{alicesLsid}}})
	runErr(t, alice, getMore, mongoerr.CursorNotFound)
}
