package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/repl/oplog"
	"humongo/internal/service"
)

// MongoDB keeps every user and user-defined role in the admin database, whatever database
// they belong to.
const (
	usersNS = "admin.system.users"
	rolesNS = "admin.system.roles"
)

// localUserStore is mongod's service.UserStore: its own admin.system.users and
// admin.system.roles (replicated like any collection, so every member finds the same users).
type localUserStore struct{ st *service.State }

// AttachUserStore makes st's users and roles its own admin.system.users and
// admin.system.roles.
func AttachUserStore(st *service.State) { st.Auth.Store = localUserStore{st} }

func idFilter(id string) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("_id", id).Build()
}

func (s localUserStore) User(ctx context.Context, name auth.UserName) (auth.User, bool, error) {
	docs, err := aggScan(ctx, s.st.DB, usersNS, idFilter(name.ID()))
	if err != nil || len(docs) == 0 {
		return auth.User{}, false, err
	}
	u, err := auth.ParseUser(docs[0])
	return u, err == nil, err
}

func (s localUserStore) Role(ctx context.Context, name auth.RoleName) (auth.Role, bool, error) {
	docs, err := aggScan(ctx, s.st.DB, rolesNS, idFilter(name.ID()))
	if err != nil || len(docs) == 0 {
		return auth.Role{}, false, err
	}
	r, err := auth.ParseRole(docs[0])
	return r, err == nil, err
}

func (s localUserStore) AnyUsers(ctx context.Context) (bool, error) {
	for _, ns := range []string{usersNS, rolesNS} {
		docs, err := aggScan(ctx, s.st.DB, ns, nil)
		if err != nil {
			return false, err
		}
		if len(docs) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// touchesAuthData reports whether a replicated batch wrote users or roles: a write to
// admin.system.users or admin.system.roles, alone or in an applyOps entry (a committed
// transaction), or a command on the admin database that creates, drops or renames one of
// them, or drops the database (MongoDB's AuthOpObserver). A secondary's user cache follows
// them at once rather than after userCacheInvalidationIntervalSecs.
func touchesAuthData(entries []*oplog.Entry) bool {
	for _, e := range entries {
		if authDataOp(e.NS, e.Op, e.O) {
			return true
		}
	}
	return false
}

func authDataOp(ns, op string, o bsoncore.Document) bool {
	if ns == usersNS || ns == rolesNS {
		return true
	}
	if op != "c" || ns != "admin.$cmd" {
		return false
	}
	elems, _ := o.Elements()
	if len(elems) == 0 {
		return false
	}
	first := elems[0]
	switch first.Key() {
	case "applyOps":
		ops, _ := first.Value().ArrayOK()
		vals, _ := ops.Values()
		for _, v := range vals {
			d, ok := v.DocumentOK()
			if !ok {
				continue
			}
			ns, _ := d.Lookup("ns").StringValueOK()
			op, _ := d.Lookup("op").StringValueOK()
			o, _ := d.Lookup("o").DocumentOK()
			if authDataOp(ns, op, o) {
				return true
			}
		}
		return false
	case "dropDatabase":
		return true
	case "renameCollection":
		from, _ := first.Value().StringValueOK()
		to, _ := o.Lookup("to").StringValueOK()
		return from == usersNS || from == rolesNS || to == usersNS || to == rolesNS
	}
	coll, _ := first.Value().StringValueOK()
	return coll == "system.users" || coll == "system.roles"
}
