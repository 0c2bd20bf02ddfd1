package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
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
