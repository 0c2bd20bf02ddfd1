package router

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// Users and roles of a sharded cluster live on the config servers (MongoDB's mongos reads
// them there and forwards the user management commands there): the router's user store
// reads the config server primary's admin.system.users and admin.system.roles, and the
// router's cache of them expires after userCacheInvalidationIntervalSecs (or at once after a
// user management command through this router).

// configUserStore is humongos's service.UserStore.
type configUserStore struct{ st *service.State }

// AttachUserStore makes the config servers' users and roles st's.
func AttachUserStore(st *service.State) { st.Auth.Store = configUserStore{st} }

// findOnConfig returns the documents of admin.<coll> matching filter on the config server
// primary (at most limit; 0: all).
func (s configUserStore) findOnConfig(ctx context.Context, coll string, filter bson.D, limit int) ([]bsoncore.Document, error) {
	c := clusterOf(s.st).Load()
	if c == nil {
		return nil, mongoerr.New(mongoerr.ShardingStateNotInitialized, "the router is not connected to its config servers")
	}
	cmd := bson.D{{Key: "find", Value: coll}, {Key: "filter", Value: filter}}
	if limit > 0 {
		cmd = append(cmd, bson.E{Key: "limit", Value: limit}, bson.E{Key: "singleBatch", Value: true})
	}
	raw, err := c.config.RunCommand(ctx, "admin", cmd, readpref.Primary())
	if err != nil {
		return nil, remoteError(err)
	}
	vals, err := bsoncore.Document(raw).Lookup("cursor", "firstBatch").Array().Values()
	if err != nil {
		return nil, err
	}
	out := make([]bsoncore.Document, 0, len(vals))
	for _, v := range vals {
		if d, ok := v.DocumentOK(); ok {
			out = append(out, append(bsoncore.Document(nil), d...))
		}
	}
	return out, nil
}

func (s configUserStore) User(ctx context.Context, name auth.UserName) (auth.User, bool, error) {
	docs, err := s.findOnConfig(ctx, "system.users", bson.D{{Key: "_id", Value: name.ID()}}, 1)
	if err != nil || len(docs) == 0 {
		return auth.User{}, false, err
	}
	u, err := auth.ParseUser(docs[0])
	return u, err == nil, err
}

func (s configUserStore) Role(ctx context.Context, name auth.RoleName) (auth.Role, bool, error) {
	docs, err := s.findOnConfig(ctx, "system.roles", bson.D{{Key: "_id", Value: name.ID()}}, 1)
	if err != nil || len(docs) == 0 {
		return auth.Role{}, false, err
	}
	r, err := auth.ParseRole(docs[0])
	return r, err == nil, err
}

func (s configUserStore) AnyUsers(ctx context.Context) (bool, error) {
	for _, coll := range []string{"system.users", "system.roles"} {
		docs, err := s.findOnConfig(ctx, coll, bson.D{}, 1)
		if err != nil {
			return false, err
		}
		if len(docs) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// userManagementCommands are the user and role management commands: the router checks the
// caller's privileges, forwards the command to the config server primary and drops its
// cached users.
func userManagementCommands() []*service.Command {
	type def struct {
		name   string
		check  func(*service.AuthSession, string, bsoncore.Document) error
		writes bool
	}
	defs := []def{
		{"createUser", service.AuthCreateUser, true},
		{"updateUser", service.AuthUpdateUser, true},
		{"dropUser", service.AuthOnDB(auth.DropUser), true},
		{"dropAllUsersFromDatabase", service.AuthOnDB(auth.DropUser), true},
		{"usersInfo", service.AuthUsersInfo, false},
		{"grantRolesToUser", service.AuthRoles(auth.GrantRole), true},
		{"revokeRolesFromUser", service.AuthRoles(auth.RevokeRole), true},
		{"createRole", service.AuthCreateRole, true},
		{"updateRole", service.AuthUpdateRole, true},
		{"dropRole", service.AuthOnDB(auth.DropRole), true},
		{"dropAllRolesFromDatabase", service.AuthOnDB(auth.DropRole), true},
		{"rolesInfo", service.AuthRolesInfo, false},
		{"grantPrivilegesToRole", service.AuthPrivileges, true},
		{"revokePrivilegesFromRole", service.AuthPrivileges, true},
		{"grantRolesToRole", service.AuthRoles(auth.GrantRole), true},
		{"revokeRolesFromRole", service.AuthRoles(auth.RevokeRole), true},
	}
	out := make([]*service.Command, 0, len(defs)+1)
	for _, d := range defs {
		h := runOnConfigForUsers
		if !d.writes {
			h = readOnConfigForUsers
		}
		out = append(out, &service.Command{Name: d.name, Handler: h, Auth: d.check,
			Secondary: service.SecondaryAlways, Help: "forwarded to the config servers"})
	}
	out = append(out, &service.Command{Name: "invalidateUserCache", Handler: runInvalidateUserCache,
		Auth: service.AuthOnCluster(auth.InvalidateUserCache), Secondary: service.SecondaryAlways,
		Help: "Invalidates the in-memory cache of user information"})
	return out
}

// umcDrop are the client fields not forwarded (the config server gets majority write
// concern from the router, as mongos's user management commands do).
var umcDrop = map[string]bool{"writeConcern": true, "maxTimeMS": true}

func runOnConfigForUsers(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	fwd := forward(cmd, umcDrop, bsoncore.NewDocumentBuilder().
		AppendDocument("writeConcern", bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()).Build())
	raw, err := c.config.RunCommand(ctx, env.DB, rawDoc(fwd), readpref.Primary())
	env.State.Auth.Invalidate()
	if err != nil {
		return nil, remoteError(err)
	}
	return passthrough(bsoncore.Document(raw)), nil
}

// readOnConfigForUsers forwards usersInfo and rolesInfo (no write concern).
func readOnConfigForUsers(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	raw, err := c.config.RunCommand(ctx, env.DB, rawDoc(forward(cmd, umcDrop, nil)), readpref.Primary())
	if err != nil {
		return nil, remoteError(err)
	}
	return passthrough(bsoncore.Document(raw)), nil
}

func runInvalidateUserCache(_ context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	env.State.Auth.Invalidate()
	return service.EmptyDoc, nil
}
