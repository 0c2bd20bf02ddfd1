package service

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
)

func testSession(t *testing.T, privs []auth.Privilege, roles ...auth.RoleName) *AuthSession {
	t.Helper()
	res, err := auth.Resolve(roles, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range privs {
		res.Privileges.Add(p)
	}
	return NewAuthSession(auth.UserName{User: "u", DB: "app"}, res)
}

func role(name, db string) auth.RoleName { return auth.RoleName{Role: name, DB: db} }

func p(r auth.Resource, acts ...auth.Action) auth.Privilege {
	return auth.Privilege{Resource: r, Actions: auth.Actions(acts...)}
}

// cmdDoc is a command from its extended JSON (key order kept).
func cmdDoc(t *testing.T, js string) bsoncore.Document {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(js), false, &d); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSharedAuthChecks runs the checks both roles share against sessions of built-in and
// hand-made privileges: allowed (nil) or ErrNotAuthorized, as MongoDB 7.0 decides.
func TestSharedAuthChecks(t *testing.T) {
	read := testSession(t, nil, role("read", "app"))
	readWrite := testSession(t, nil, role("readWrite", "app"))
	updateOnly := testSession(t, []auth.Privilege{p(auth.NS("app", "c"), auth.Find, auth.Update)})
	dbAdmin := testSession(t, nil, role("dbAdmin", "app"))
	readAny := testSession(t, nil, role("readAnyDatabase", "admin"))
	clusterMonitor := testSession(t, nil, role("clusterMonitor", "admin"))
	rwAndReadOther := testSession(t, nil, role("readWrite", "app"), role("read", "other"))
	createOnly := testSession(t, []auth.Privilege{p(auth.DB("app"), auth.CreateCollection)})
	nsOnly := testSession(t, []auth.Privilege{p(auth.NS("app", "c"), auth.Find)})
	none := testSession(t, nil)

	agg := AuthAggregate(false)
	cases := []struct {
		name  string
		s     *AuthSession
		check AuthCheck
		db    string
		cmd   string
		allow bool
	}{
		{"find: read", read, AuthFind, "app", `{"find": "c"}`, true},
		{"find: another database", read, AuthFind, "other", `{"find": "c"}`, false},
		{"find: nothing", none, AuthFind, "app", `{"find": "c"}`, false},
		{"find with a term needs internal", read, AuthFind, "app", `{"find": "c", "term": 1}`, false},
		{"find by UUID needs the database", nsOnly, AuthFind, "app", `{"find": {"$binary": {"base64": "AAAAAAAAAAAAAAAAAAAAAA==", "subType": "04"}}}`, false},
		{"insert: read", read, AuthInsert, "app", `{"insert": "c"}`, false},
		{"insert: readWrite", readWrite, AuthInsert, "app", `{"insert": "c"}`, true},
		{"insert bypassing validation: readWrite", readWrite, AuthInsert, "app", `{"insert": "c", "bypassDocumentValidation": true}`, false},
		{"update: update only", updateOnly, AuthUpdate, "app", `{"update": "c", "updates": [{"q": {}, "u": {}}]}`, true},
		{"upsert: update only", updateOnly, AuthUpdate, "app", `{"update": "c", "updates": [{"q": {}, "u": {}, "upsert": true}]}`, false},
		{"delete: read", read, AuthDelete, "app", `{"delete": "c"}`, false},
		{"findAndModify update: update only", updateOnly, AuthFindAndModify, "app", `{"findAndModify": "c", "update": {}}`, true},
		{"findAndModify remove: update only", updateOnly, AuthFindAndModify, "app", `{"findAndModify": "c", "remove": true}`, false},
		{"findAndModify upsert: update only", updateOnly, AuthFindAndModify, "app", `{"findAndModify": "c", "update": {}, "upsert": true}`, false},

		{"aggregate: read", read, agg, "app", `{"aggregate": "c", "pipeline": [{"$match": {}}]}`, true},
		{"aggregate $out: read", read, agg, "app", `{"aggregate": "c", "pipeline": [{"$out": "d"}]}`, false},
		{"aggregate $out: readWrite", readWrite, agg, "app", `{"aggregate": "c", "pipeline": [{"$out": "d"}]}`, true},
		{"aggregate $out to another database", readWrite, agg, "app", `{"aggregate": "c", "pipeline": [{"$out": {"db": "other", "coll": "d"}}]}`, false},
		{"aggregate $merge: update only on the target", updateOnly, agg, "app", `{"aggregate": "c", "pipeline": [{"$merge": {"into": "c", "whenNotMatched": "discard"}}]}`, true},
		{"aggregate $merge inserting: update only", updateOnly, agg, "app", `{"aggregate": "c", "pipeline": [{"$merge": "c"}]}`, false},
		{"aggregate $lookup in another database", readWrite, agg, "app", `{"aggregate": "c", "pipeline": [{"$lookup": {"from": {"db": "other", "coll": "x"}, "as": "x"}}]}`, false},
		{"aggregate $lookup readable", rwAndReadOther, agg, "app", `{"aggregate": "c", "pipeline": [{"$lookup": {"from": {"db": "other", "coll": "x"}, "as": "x"}}]}`, true},
		{"aggregate $facet hides a $lookup", read, agg, "app", `{"aggregate": "c", "pipeline": [{"$facet": {"a": [{"$unionWith": {"coll": "x", "pipeline": [{"$out": "y"}]}}]}}]}`, false},
		{"aggregate $unionWith $documents needs no find", none, agg, "app", `{"aggregate": 1, "pipeline": [{"$documents": []}, {"$unionWith": {"pipeline": [{"$documents": []}]}}]}`, true},
		{"aggregate $collStats: read", read, agg, "app", `{"aggregate": "c", "pipeline": [{"$collStats": {}}]}`, true},
		{"aggregate $indexStats: read", read, agg, "app", `{"aggregate": "c", "pipeline": [{"$indexStats": {}}]}`, false},
		{"aggregate $indexStats: clusterMonitor", clusterMonitor, agg, "app", `{"aggregate": "c", "pipeline": [{"$indexStats": {}}]}`, true},
		{"aggregate $currentOp own ops", none, agg, "admin", `{"aggregate": 1, "pipeline": [{"$currentOp": {}}]}`, true},
		{"aggregate $currentOp allUsers", read, agg, "admin", `{"aggregate": 1, "pipeline": [{"$currentOp": {"allUsers": true}}]}`, false},
		{"aggregate $currentOp allUsers: clusterMonitor", clusterMonitor, agg, "admin", `{"aggregate": 1, "pipeline": [{"$currentOp": {"allUsers": true}}]}`, true},
		{"aggregate $listLocalSessions own", none, agg, "app", `{"aggregate": 1, "pipeline": [{"$listLocalSessions": {}}]}`, true},
		{"aggregate $listLocalSessions of another user", read, agg, "app", `{"aggregate": 1, "pipeline": [{"$listLocalSessions": {"users": [{"user": "v", "db": "app"}]}}]}`, false},
		{"collection change stream: read", read, agg, "app", `{"aggregate": "c", "pipeline": [{"$changeStream": {}}]}`, true},
		{"database change stream: read", read, agg, "app", `{"aggregate": 1, "pipeline": [{"$changeStream": {}}]}`, true},
		{"cluster change stream: read", read, agg, "admin", `{"aggregate": 1, "pipeline": [{"$changeStream": {"allChangesForCluster": true}}]}`, false},
		{"cluster change stream: readAnyDatabase", readAny, agg, "admin", `{"aggregate": 1, "pipeline": [{"$changeStream": {"allChangesForCluster": true}}]}`, true},
		{"explain find: read", read, AuthExplain(false), "app", `{"explain": {"find": "c"}}`, true},
		{"explain delete: read", read, AuthExplain(false), "app", `{"explain": {"delete": "c"}}`, false},
		{"explain an unknown command", read, AuthExplain(false), "app", `{"explain": {"nope": "c"}}`, false},

		{"create: createCollection", createOnly, AuthCreate(false), "app", `{"create": "c"}`, true},
		{"create: insert suffices", readWrite, AuthCreate(false), "app", `{"create": "c"}`, true},
		{"create capped: createCollection", createOnly, AuthCreate(false), "app", `{"create": "c", "capped": true, "size": 1024}`, false},
		{"create capped: readWrite", readWrite, AuthCreate(false), "app", `{"create": "c", "capped": true, "size": 1024}`, true},
		{"create: read", read, AuthCreate(false), "app", `{"create": "c"}`, false},
		{"create a view a reader could read through into another database", readWrite, AuthCreate(false), "app", `{"create": "v", "viewOn": "c", "pipeline": [{"$lookup": {"from": {"db": "other", "coll": "x"}, "as": "x"}}]}`, false},
		{"create a view its creator cannot read anyway", createOnly, AuthCreate(false), "app", `{"create": "v", "viewOn": "c", "pipeline": []}`, true},
		{"collMod: dbAdmin", dbAdmin, AuthCollMod(false), "app", `{"collMod": "c"}`, true},
		{"collMod: readWrite", readWrite, AuthCollMod(false), "app", `{"collMod": "c"}`, false},

		{"rename in a database: readWrite", readWrite, AuthRenameCollection, "admin", `{"renameCollection": "app.a", "to": "app.b"}`, true},
		{"rename across databases: readWrite on the source", readWrite, AuthRenameCollection, "admin", `{"renameCollection": "app.a", "to": "other.b"}`, false},
		{"rename in a database: read", read, AuthRenameCollection, "admin", `{"renameCollection": "app.a", "to": "app.b"}`, false},

		{"listCollections: read", read, AuthListCollections, "app", `{"listCollections": 1}`, true},
		{"listCollections: a collection's privilege", nsOnly, AuthListCollections, "app", `{"listCollections": 1}`, false},
		{"listCollections authorized names: a collection's privilege", nsOnly, AuthListCollections, "app", `{"listCollections": 1, "authorizedCollections": true, "nameOnly": true}`, true},
		{"listCollections authorized names: nothing there", nsOnly, AuthListCollections, "other", `{"listCollections": 1, "authorizedCollections": true, "nameOnly": true}`, false},
		{"currentOp: clusterMonitor", clusterMonitor, AuthCurrentOp, "admin", `{"currentOp": 1}`, true},
		{"currentOp: read", read, AuthCurrentOp, "admin", `{"currentOp": 1}`, false},
		{"currentOp $ownOps: read", read, AuthCurrentOp, "admin", `{"currentOp": 1, "$ownOps": true}`, true},
		{"killAllSessionsByPattern: clusterMonitor", clusterMonitor, AuthKillAllSessionsByPattern, "admin", `{"killAllSessionsByPattern": []}`, false},
		{"moveChunk by full namespace", readWrite, AuthOnFullNS(auth.MoveChunk), "admin", `{"moveChunk": "app.c"}`, false},
		{"internal: root", testSession(t, nil, role("root", "admin")), AuthInternal, "admin", `{"replSetHeartbeat": "rs"}`, false},
	}
	for _, c := range cases {
		err := c.check(c.s, c.db, cmdDoc(t, c.cmd))
		switch {
		case c.allow && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case !c.allow && !errors.Is(err, ErrNotAuthorized):
			t.Errorf("%s: allowed (%v)", c.name, err)
		}
	}
}

// TestListDatabasesFilter checks listDatabases' authorizedDatabases rules.
func TestListDatabasesFilter(t *testing.T) {
	read := testSession(t, nil, role("read", "app"))
	visible, err := ListDatabasesFilter(read, cmdDoc(t, `{"listDatabases": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	if !visible("app") || visible("other") {
		t.Errorf("read@app sees app %v, other %v", visible("app"), visible("other"))
	}
	if _, err := ListDatabasesFilter(read, cmdDoc(t, `{"listDatabases": 1, "authorizedDatabases": false}`)); err == nil {
		t.Error("authorizedDatabases: false without listDatabases succeeded")
	}
	readAny := testSession(t, nil, role("readAnyDatabase", "admin"))
	visible, err = ListDatabasesFilter(readAny, cmdDoc(t, `{"listDatabases": 1, "authorizedDatabases": false}`))
	if err != nil || !visible("config") {
		t.Errorf("readAnyDatabase with authorizedDatabases: false: %v, config %v", err, err == nil && visible("config"))
	}
}
