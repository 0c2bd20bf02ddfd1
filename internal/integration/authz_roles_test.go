package integration

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"humongo/internal/mongoerr"
)

// The built-in roles of the matrix, with whether each is granted on admin only (the cluster
// and any-database roles) or on the user's own database.
var matrixRoles = []struct {
	name      string
	adminOnly bool
}{
	{"read", false}, {"readWrite", false}, {"dbAdmin", false}, {"dbOwner", false},
	{"userAdmin", false}, {"clusterMonitor", true}, {"clusterManager", true},
	{"clusterAdmin", true}, {"backup", true}, {"restore", true}, {"readAnyDatabase", true},
	{"readWriteAnyDatabase", true}, {"userAdminAnyDatabase", true},
	{"dbAdminAnyDatabase", true}, {"root", true},
}

// roleDB is the database a role's user works in: its own, so that what one role may do
// (drop a collection, drop the database) does not disturb another.
func roleDB(role string) string { return "m_" + role }

// matrixStep is one command of the matrix: run on the role's database (or admin), and the
// roles MongoDB 7.0's built-in roles allow it to (every other one gets Unauthorized, 13).
type matrixStep struct {
	name    string
	onAdmin bool
	cmd     func(role string) bson.D
	allowed []string
}

// matrixSteps are one command of each action class, in the order each role runs them
// (dropDatabase last: it removes the role's database).
var matrixSteps = []matrixStep{
	{"find", false, func(string) bson.D { return d("find", "c") },
		[]string{"read", "readWrite", "dbOwner", "backup", "readAnyDatabase", "readWriteAnyDatabase", "root"}},
	{"insert", false, func(string) bson.D { return d("insert", "c", "documents", a(d("x", 1))) },
		[]string{"readWrite", "dbOwner", "restore", "readWriteAnyDatabase", "root"}},
	{"update", false, func(string) bson.D {
		return d("update", "c", "updates", a(d("q", d("x", 1), "u", d("$set", d("y", 1)))))
	}, []string{"readWrite", "dbOwner", "readWriteAnyDatabase", "root"}},
	{"delete", false, func(string) bson.D { return d("delete", "c", "deletes", a(d("q", d("x", 1), "limit", 0))) },
		[]string{"readWrite", "dbOwner", "readWriteAnyDatabase", "root"}},
	{"create", false, func(string) bson.D { return d("create", "created") },
		[]string{"readWrite", "dbAdmin", "dbOwner", "restore", "readWriteAnyDatabase", "dbAdminAnyDatabase", "root"}},
	{"createIndexes", false, func(string) bson.D {
		return d("createIndexes", "c", "indexes", a(d("key", d("a", 1), "name", "a_1")))
	}, []string{"readWrite", "dbAdmin", "dbOwner", "restore", "readWriteAnyDatabase", "dbAdminAnyDatabase", "root"}},
	{"drop", false, func(string) bson.D { return d("drop", "dropme") },
		[]string{"readWrite", "dbAdmin", "dbOwner", "restore", "readWriteAnyDatabase", "dbAdminAnyDatabase", "root"}},
	{"listCollections", false, func(string) bson.D { return d("listCollections", 1) },
		[]string{"read", "readWrite", "dbAdmin", "dbOwner", "backup", "restore", "readAnyDatabase",
			"readWriteAnyDatabase", "dbAdminAnyDatabase", "root"}},
	{"listDatabases (authorizedDatabases: false)", true, func(string) bson.D {
		return d("listDatabases", 1, "nameOnly", true, "authorizedDatabases", false)
	}, []string{"clusterMonitor", "clusterAdmin", "backup", "readAnyDatabase", "readWriteAnyDatabase",
		"userAdminAnyDatabase", "dbAdminAnyDatabase", "root"}},
	{"collStats", false, func(string) bson.D { return d("collStats", "c") },
		[]string{"read", "readWrite", "dbAdmin", "dbOwner", "clusterMonitor", "clusterAdmin", "backup",
			"readAnyDatabase", "readWriteAnyDatabase", "dbAdminAnyDatabase", "root"}},
	{"dbStats", false, func(string) bson.D { return d("dbStats", 1) },
		[]string{"read", "readWrite", "dbAdmin", "dbOwner", "clusterMonitor", "clusterAdmin",
			"readAnyDatabase", "readWriteAnyDatabase", "dbAdminAnyDatabase", "root"}},
	{"serverStatus", true, func(string) bson.D { return d("serverStatus", 1) },
		[]string{"clusterMonitor", "clusterAdmin", "backup", "root"}},
	{"currentOp", true, func(string) bson.D { return d("currentOp", 1) },
		[]string{"clusterMonitor", "clusterAdmin", "root"}},
	{"createUser", false, func(role string) bson.D {
		return d("createUser", "new_"+role, "pwd", "x", "roles", a(), "mechanisms", a("SCRAM-SHA-1"))
	}, []string{"dbOwner", "userAdmin", "restore", "userAdminAnyDatabase", "root"}},
	{"grantRolesToUser", false, func(role string) bson.D {
		return d("grantRolesToUser", "granted", "roles", a(d("role", "read", "db", roleDB(role))))
	}, []string{"dbOwner", "userAdmin", "restore", "userAdminAnyDatabase", "root"}},
	{"getParameter", true, func(string) bson.D { return d("getParameter", 1, "logLevel", 1) },
		[]string{"clusterMonitor", "clusterAdmin", "backup", "restore", "root"}},
	{"setParameter (the same value)", true, func(string) bson.D { return d("setParameter", 1, "logLevel", 0) },
		[]string{"clusterAdmin", "root"}},
	{"logRotate", true, func(string) bson.D { return d("logRotate", 1) },
		[]string{"clusterAdmin", "root"}},
	{"dropDatabase", false, func(string) bson.D { return d("dropDatabase", 1) },
		[]string{"dbAdmin", "dbOwner", "clusterAdmin", "dbAdminAnyDatabase", "root"}},
}

// TestAuthzRoleMatrix runs one humongod with --auth, a user per built-in role, and a command
// of each action class as each user: each is allowed or refused with Unauthorized as
// MongoDB's built-in roles say. Each user also kills a cursor of its own (when it may open
// one); the cursor of another user is not its to use or kill without killAnyCursor.
func TestAuthzRoleMatrix(t *testing.T) {
	t.Parallel()
	s := newServer(t, "", "--auth")
	anon := connect(t, s.uri())
	run(t, anon.Database("admin"), d("createUser", "admin", "pwd", "adminpw", "roles", a("root")))
	root := connectAs(t, s, "admin", "adminpw", "SCRAM-SHA-256", "admin")
	for _, r := range matrixRoles {
		db := root.Database(roleDB(r.name))
		run(t, db, d("insert", "c", "documents", a(d("seed", 1), d("seed", 2), d("seed", 3))))
		run(t, db, d("create", "dropme"))
		run(t, db, d("createUser", "granted", "pwd", "x", "roles", a(), "mechanisms", a("SCRAM-SHA-1")))
		on := roleDB(r.name)
		if r.adminOnly {
			on = "admin"
		}
		run(t, root.Database("admin"), d("createUser", r.name, "pwd", r.name+"pw",
			"roles", a(d("role", r.name, "db", on)), "mechanisms", a("SCRAM-SHA-256")))
	}

	for _, r := range matrixRoles {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			cl := connectAs(t, s, r.name, r.name+"pw", "SCRAM-SHA-256", "admin")
			for _, st := range matrixSteps {
				db := cl.Database(roleDB(r.name))
				if st.onAdmin {
					db = cl.Database("admin")
				}
				want := slices.Contains(st.allowed, r.name)
				_, err := runRaw(t, db, st.cmd(r.name))
				var ce mongo.CommandError
				denied := errors.As(err, &ce) && ce.Code == int32(mongoerr.Unauthorized)
				switch {
				case want && err != nil:
					t.Errorf("%s: want allowed, got %v", st.name, err)
				case !want && !denied:
					t.Errorf("%s: want Unauthorized, got %v", st.name, err)
				case denied && !strings.Contains(ce.Message, deniedMessage(st, db.Name())):
					t.Errorf("%s: Unauthorized message %q", st.name, ce.Message)
				}
				if st.name == "find" && want {
					killOwnCursor(t, db)
				}
			}
		})
	}

	t.Run("another user's cursor", func(t *testing.T) {
		// root's cursor on m_readAnyDatabase.c: readAnyDatabase may read the collection
		// but not use or kill the cursor; clusterAdmin may kill it (killAnyCursor).
		t.Parallel()
		const role = "readAnyDatabase"
		rootDB := root.Database(roleDB(role))
		r := run(t, rootDB, d("find", "c", "batchSize", 1))
		id := lookup(t, r, "cursor.id").Int64()
		reader := connectAs(t, s, role, role+"pw", "SCRAM-SHA-256", "admin").Database(roleDB(role))
		ce := runErr(t, reader, d("getMore", id, "collection", "c"), mongoerr.Unauthorized)
		if want := fmt.Sprintf("cursor id %d was not created by the authenticated user", id); ce.Message != want {
			t.Errorf("getMore of root's cursor: %q, want %q", ce.Message, want)
		}
		runErr(t, reader, d("killCursors", "c", "cursors", a(id)), mongoerr.Unauthorized)
		clusterAdmin := connectAs(t, s, "clusterAdmin", "clusterAdminpw", "SCRAM-SHA-256", "admin").Database(roleDB(role))
		killed := run(t, clusterAdmin, d("killCursors", "c", "cursors", a(id)))
		if got := killedCount(t, killed); got != 1 {
			t.Errorf("clusterAdmin's killCursors: %v", killed)
		}
	})

	t.Run("currentOp $ownOps lists the user's own operations", func(t *testing.T) {
		t.Parallel()
		cl := connectAs(t, s, "read", "readpw", "SCRAM-SHA-256", "admin")
		r := run(t, cl.Database("admin"), d("currentOp", 1, "$ownOps", true, "$all", true))
		ops := array(t, lookup(t, r, "inprog"))
		if len(ops) == 0 {
			t.Fatalf("currentOp $ownOps listed nothing, not even itself: %v", r)
		}
		for _, op := range ops {
			if users := fmt.Sprint(op.Lookup("effectiveUsers")); !strings.Contains(users, `"read"`) {
				t.Errorf("currentOp $ownOps lists another user's connection: %v", op)
			}
		}
	})

	t.Run("listDatabases shows a user its databases", func(t *testing.T) {
		t.Parallel()
		cl := connectAs(t, s, "read", "readpw", "SCRAM-SHA-256", "admin")
		r := run(t, cl.Database("admin"), d("listDatabases", 1, "nameOnly", true))
		var names []string
		for _, db := range array(t, lookup(t, r, "databases")) {
			names = append(names, lookup(t, db, "name").StringValue())
		}
		if !slices.Equal(names, []string{roleDB("read")}) {
			t.Errorf("read@m_read lists %v", names)
		}
	})
}

// deniedMessage is what the Unauthorized reply of st says: dispatch's for a failed check,
// listDatabases' own when it may not list every database.
func deniedMessage(st matrixStep, db string) string {
	if strings.HasPrefix(st.name, "listDatabases") {
		return "Insufficient permissions to list all databases"
	}
	return "not authorized on " + db + " to execute command"
}

// killOwnCursor opens a cursor on db.c and kills it: a user's own cursor needs no privilege.
func killOwnCursor(t *testing.T, db *mongo.Database) {
	t.Helper()
	r := run(t, db, d("find", "c", "batchSize", 1))
	id := lookup(t, r, "cursor.id").Int64()
	if id == 0 {
		t.Errorf("find with batchSize 1 left no cursor open: %v", r)
		return
	}
	killed := run(t, db, d("killCursors", "c", "cursors", a(id)))
	if got := killedCount(t, killed); got != 1 {
		t.Errorf("killCursors of its own cursor: %v", killed)
	}
}

// killedCount is the number of cursors a killCursors reply says it killed.
func killedCount(t *testing.T, reply bson.Raw) int {
	t.Helper()
	vals, err := lookup(t, reply, "cursorsKilled").Array().Values()
	if err != nil {
		t.Fatal(err)
	}
	return len(vals)
}
