package auth

import (
	"testing"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func resolve(t *testing.T, roles ...RoleName) Privileges {
	t.Helper()
	r, err := Resolve(roles, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.Privileges
}

func TestBuiltinRoles(t *testing.T) {
	read := resolve(t, RoleName{"read", "app"})
	cases := []struct {
		name  string
		ps    Privileges
		res   Resource
		act   Action
		allow bool
	}{
		{"read finds", read, NS("app", "c"), Find, true},
		{"read cannot insert", read, NS("app", "c"), Insert, false},
		{"read is per database", read, NS("other", "c"), Find, false},
		{"read covers system.js", read, NS("app", "system.js"), Find, true},
		{"read skips system.users", read, NS("app", "system.users"), Find, false},
		{"read lists collections", read, DB("app"), ListCollections, true},
		{"readWrite inserts", resolve(t, RoleName{"readWrite", "app"}), NS("app", "c"), Insert, true},
		{"dbOwner drops the database", resolve(t, RoleName{"dbOwner", "app"}), DB("app"), DropDatabase, true},
		{"dbOwner creates users", resolve(t, RoleName{"dbOwner", "app"}), DB("app"), CreateUser, true},
		{"admin-only role on another db is nothing", resolve(t, RoleName{"root", "app"}), NS("app", "c"), Find, false},
		{"root finds anywhere", resolve(t, RoleName{"root", "admin"}), NS("x", "y"), Find, true},
		{"root shuts down", resolve(t, RoleName{"root", "admin"}), Cluster(), Shutdown, true},
		{"root reads users", resolve(t, RoleName{"root", "admin"}), NS("admin", "system.users"), Find, true},
		{"root has no internal", resolve(t, RoleName{"root", "admin"}), Cluster(), Internal, false},
		{"readAnyDatabase skips local", resolve(t, RoleName{"readAnyDatabase", "admin"}), NS("local", "oplog.rs"), Find, false},
		{"clusterMonitor reads the oplog", resolve(t, RoleName{"clusterMonitor", "admin"}), NS("local", "oplog.rs"), Find, true},
		{"clusterMonitor serverStatus", resolve(t, RoleName{"clusterMonitor", "admin"}), Cluster(), ServerStatus, true},
		{"clusterMonitor cannot shut down", resolve(t, RoleName{"clusterMonitor", "admin"}), Cluster(), Shutdown, false},
		{"__system is everything", resolve(t, RoleName{"__system", "admin"}), Cluster(), Internal, true},
		{"readWriteAnyDatabase inherits listDatabases", resolve(t, RoleName{"readWriteAnyDatabase", "admin"}), Cluster(), ListDatabases, true},
	}
	for _, c := range cases {
		if got := c.ps.Allow(c.res, c.act); got != c.allow {
			t.Errorf("%s: Allow(%v, %v) = %v", c.name, c.res, c.act, got)
		}
	}
}

// TestAnyOn checks the "any privilege here" test listDatabases and listCollections filter
// with: a database is covered by privileges on it, on its collections, on a collection name
// anywhere and (for normal databases) on every normal resource.
func TestAnyOn(t *testing.T) {
	nsOnly := Privileges{}
	nsOnly.Add(Privilege{NS("app", "c"), Actions(Find)})
	anyNormal := Privileges{}
	anyNormal.Add(Privilege{AnyNormal(), Actions(Find)})
	collName := Privileges{}
	collName.Add(Privilege{CollectionName("system.profile"), Actions(Find)})
	cases := []struct {
		name string
		ps   Privileges
		res  Resource
		want bool
	}{
		{"read: its database", resolve(t, RoleName{"read", "app"}), DB("app"), true},
		{"read: a collection of its database", resolve(t, RoleName{"read", "app"}), NS("app", "c"), true},
		{"read: another database", resolve(t, RoleName{"read", "app"}), DB("other"), false},
		{"read: another database's collection", resolve(t, RoleName{"read", "app"}), NS("other", "c"), false},
		{"a namespace privilege: its database", nsOnly, DB("app"), true},
		{"a namespace privilege: its collection", nsOnly, NS("app", "c"), true},
		{"a namespace privilege: a sibling", nsOnly, NS("app", "d"), false},
		{"a collection name: any database", collName, DB("x"), true},
		{"every normal resource: a normal database", anyNormal, DB("x"), true},
		{"every normal resource: not config", anyNormal, DB("config"), false},
		{"every normal resource: not a system collection", anyNormal, NS("x", "system.users"), false},
		{"nothing", Privileges{}, DB("app"), false},
	}
	for _, c := range cases {
		if got := c.ps.AnyOn(c.res); got != c.want {
			t.Errorf("%s: AnyOn(%v) = %v", c.name, c.res, got)
		}
	}
}

func TestUserDefinedRoles(t *testing.T) {
	doc := func(v any) bsoncore.Document {
		b, err := bson.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	roles := map[RoleName]bsoncore.Document{
		{"a", "app"}: doc(bson.M{"role": "a", "db": "app",
			"privileges": bson.A{bson.M{"resource": bson.M{"db": "app", "collection": "logs"}, "actions": bson.A{"insert"}}},
			"roles":      bson.A{bson.M{"role": "b", "db": "app"}}}),
		{"b", "app"}: doc(bson.M{"role": "b", "db": "app", "privileges": bson.A{},
			"roles": bson.A{bson.M{"role": "read", "db": "app"}, bson.M{"role": "a", "db": "app"}}}),
	}
	lookup := func(n RoleName) (Role, bool, error) {
		d, ok := roles[n]
		if !ok {
			return Role{}, false, nil
		}
		r, err := ParseRole(d)
		return r, err == nil, err
	}
	r, err := Resolve([]RoleName{{"a", "app"}, {"gone", "app"}}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Privileges.Allow(NS("app", "logs"), Insert) || r.Privileges.Allow(NS("app", "other"), Insert) ||
		!r.Privileges.Allow(NS("app", "other"), Find) {
		t.Errorf("privileges %v", r.Privileges.List())
	}
	if len(r.Roles) != 3 {
		t.Errorf("roles %v, want a, b and read (a cycle and a missing role)", r.Roles)
	}
	if _, err := ParsePrivileges(bsoncore.Value{Type: bsoncore.TypeArray, Data: doc(bson.M{"0": bson.M{"resource": bson.M{"cluster": true}, "actions": bson.A{"fly"}}})}); err == nil {
		t.Error("an unknown action was accepted")
	}
}

// TestSCRAM authenticates with the driver's client side (its password handling: the SHA-1
// digest, SASLprep for SHA-256) against a stored credential.
func TestSCRAM(t *testing.T) {
	for _, mech := range []string{MechSCRAMSHA1, MechSCRAMSHA256} {
		for _, pw := range []string{"secret", "wrong"} {
			prepared, err := PreparePassword(mech, "alice", "secret")
			if err != nil {
				t.Fatal(err)
			}
			cred, err := MakeCredential(mech, prepared, 4096)
			if err != nil {
				t.Fatal(err)
			}
			h := scram.SHA256
			clientPw := pw
			if mech == MechSCRAMSHA1 {
				h, clientPw = scram.SHA1, SHA1PasswordDigest("alice", pw)
			}
			cl, _ := h.NewClient("alice", clientPw, "")
			cc := cl.NewConversation()
			sc, err := NewConversation(mech, func(u string) (Credential, error) {
				if u != "alice" {
					return Credential{}, ErrUnknownUser
				}
				return cred, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			msg, _ := cc.Step("")
			var serr error
			for !sc.Done() && serr == nil {
				var reply string
				reply, serr = sc.Step(msg)
				if serr == nil {
					msg, _ = cc.Step(reply)
				}
			}
			if ok := sc.Valid(); ok != (pw == "secret") {
				t.Errorf("%s with password %q: valid %v (%v)", mech, pw, ok, serr)
			}
		}
	}
}
