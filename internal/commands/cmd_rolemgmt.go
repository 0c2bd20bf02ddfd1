package commands

import (
	"context"
	"slices"
	"sort"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/storage"
)

// The role management commands: user-defined roles in admin.system.roles (privileges and
// granted roles, resolved with the built-in ones by auth.Resolve).

func addRoleManagement(r *service.Registry) {
	for _, c := range []*service.Command{
		{Name: "createRole", Handler: runCreateRole, Writes: true, Auth: service.AuthCreateRole,
			Help: "Adds a role to the system"},
		{Name: "updateRole", Handler: runUpdateRole, Writes: true, Auth: service.AuthUpdateRole,
			Help: "Used to update a role"},
		{Name: "dropRole", Handler: runDropRole, Writes: true, Auth: service.AuthOnDB(auth.DropRole),
			Help: "Drops a single role."},
		{Name: "dropAllRolesFromDatabase", Handler: runDropAllRoles, Writes: true, Auth: service.AuthOnDB(auth.DropRole),
			Help: "Drops all roles from the given database."},
		{Name: "rolesInfo", Handler: runRolesInfo, Secondary: service.SecondaryOptIn, Auth: service.AuthRolesInfo,
			Help: "Returns information about roles."},
		{Name: "grantPrivilegesToRole", Handler: runGrantPrivilegesToRole, Writes: true, Auth: service.AuthPrivileges,
			Help: "Grants privileges to a role"},
		{Name: "revokePrivilegesFromRole", Handler: runRevokePrivilegesFromRole, Writes: true, Auth: service.AuthPrivileges,
			Help: "Revokes privileges from a role"},
		{Name: "grantRolesToRole", Handler: runGrantRolesToRole, Writes: true, Auth: service.AuthRoles(auth.GrantRole),
			Help: "Grants roles to another role."},
		{Name: "revokeRolesFromRole", Handler: runRevokeRolesFromRole, Writes: true, Auth: service.AuthRoles(auth.RevokeRole),
			Help: "Revokes roles from another role."},
		{Name: "invalidateUserCache", Handler: runInvalidateUserCache, Secondary: service.SecondaryAlways,
			Auth: service.AuthOnCluster(auth.InvalidateUserCache), Help: "Invalidates the in-memory cache of user information"},
	} {
		if c.Writes {
			c.Handler = umcWithWriteConcern(c.Handler)
		}
		add(r, c)
	}
}

func roleDoc(name auth.RoleName, privs []auth.Privilege, roles []auth.RoleName) bsoncore.Document {
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "_id", name.ID())
		b = bsoncore.AppendStringElement(b, "role", name.Role)
		b = bsoncore.AppendStringElement(b, "db", name.DB)
		b = auth.AppendPrivileges(b, "privileges", privs)
		return auth.AppendRoleNames(b, "roles", roles)
	})
}

// umcRoleArgs reads privileges (required when need) and roles (required when need).
func umcRoleArgs(cmd bsoncore.Document, c, db string, need bool) (privs []auth.Privilege, hasPrivs bool, roles []auth.RoleName, hasRoles bool, err error) {
	if v := lookup(cmd, "privileges"); v.Type != 0 {
		if privs, err = auth.ParsePrivileges(v); err != nil {
			return
		}
		hasPrivs = true
	} else if need {
		err = mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.privileges' is missing but a required field", c)
		return
	}
	if v := lookup(cmd, "roles"); v.Type != 0 {
		if roles, err = auth.ParseRoleNames(v, db); err != nil {
			return
		}
		hasRoles = true
	} else if need {
		err = mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.roles' is missing but a required field", c)
	}
	return
}

func checkPrivilegeScope(db string, privs []auth.Privilege) error {
	if db == "admin" {
		return nil
	}
	for _, p := range privs {
		if p.Resource.Kind != auth.KindDB && p.Resource.Kind != auth.KindNS || p.Resource.DB != db {
			return mongoerr.Newf(mongoerr.InvalidRoleModification,
				"Roles on the '%s' database cannot be granted privileges that target other databases or the cluster", db)
		}
	}
	return nil
}

func checkRoleScope(db string, roles []auth.RoleName) error {
	if db == "admin" {
		return nil
	}
	for _, r := range roles {
		if r.DB != db {
			return mongoerr.Newf(mongoerr.InvalidRoleModification,
				"Roles on the '%s' database cannot be granted roles from other databases", db)
		}
	}
	return nil
}

func runCreateRole(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const c = "createRole"
	role, err := umcName(cmd, "Role")
	if err != nil {
		return nil, err
	}
	name := auth.RoleName{Role: role, DB: env.DB}
	if env.DB == "local" || env.DB == "$external" {
		return nil, mongoerr.Newf(mongoerr.BadValue, "Cannot create roles in the %s database", env.DB)
	}
	if auth.IsBuiltinRole(auth.RoleName{Role: role, DB: "admin"}) {
		return nil, mongoerr.Newf(mongoerr.BadValue, "Cannot create roles with the same name as a built-in role")
	}
	privs, _, roles, _, err := umcRoleArgs(cmd, c, env.DB, true)
	if err != nil {
		return nil, err
	}
	if err := checkPrivilegeScope(env.DB, privs); err != nil {
		return nil, err
	}
	if err := checkRoleScope(env.DB, roles); err != nil {
		return nil, err
	}
	if err := umcCheckRoles(ctx, env, roles); err != nil {
		return nil, err
	}
	if slices.Contains(roles, name) {
		return nil, mongoerr.Newf(mongoerr.InvalidRoleModification, "Cannot grant role %s to itself", name)
	}
	d := roleDoc(name, privs, roles)
	err = umcWrite(ctx, env, rolesNS, func(ru *storage.RecoveryUnit, coll *index.Collection) error {
		_, _, found, err := coll.FindByID(ru, idValue(name.ID()))
		if err != nil {
			return err
		}
		if found {
			return mongoerr.Newf(mongoerr.Location51002, "Role \"%s\" already exists", name)
		}
		_, err = coll.InsertDocument(ru, d)
		return err
	})
	if err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

// umcChangeRole replaces role name's document with change(old) (RoleNotFound when missing;
// built-in roles cannot change).
func umcChangeRole(ctx context.Context, env *service.Env, name auth.RoleName, change func(r auth.Role) ([]auth.Privilege, []auth.RoleName, error)) error {
	if auth.IsBuiltinRole(name) {
		return mongoerr.Newf(mongoerr.InvalidRoleModification, "Cannot update built-in role: %s", name)
	}
	return umcWrite(ctx, env, rolesNS, func(ru *storage.RecoveryUnit, coll *index.Collection) error {
		rid, old, found, err := coll.FindByID(ru, idValue(name.ID()))
		if err != nil {
			return err
		}
		if !found {
			return mongoerr.Newf(mongoerr.RoleNotFound, "Role %s not found", name)
		}
		r, err := auth.ParseRole(old)
		if err != nil {
			return err
		}
		privs, roles, err := change(r)
		if err != nil {
			return err
		}
		if err := checkPrivilegeScope(name.DB, privs); err != nil {
			return err
		}
		if err := checkRoleScope(name.DB, roles); err != nil {
			return err
		}
		if slices.Contains(roles, name) {
			return mongoerr.Newf(mongoerr.InvalidRoleModification, "Cannot grant role %s to itself", name)
		}
		return coll.UpdateDocument(ru, rid, old, roleDoc(name, privs, roles))
	})
}

func runUpdateRole(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	role, err := umcName(cmd, "Role")
	if err != nil {
		return nil, err
	}
	privs, hasPrivs, roles, hasRoles, err := umcRoleArgs(cmd, "updateRole", env.DB, false)
	if err != nil {
		return nil, err
	}
	if !hasPrivs && !hasRoles {
		return nil, mongoerr.New(mongoerr.BadValue, "Must specify at least one field to update in updateRole")
	}
	if err := umcCheckRoles(ctx, env, roles); err != nil {
		return nil, err
	}
	err = umcChangeRole(ctx, env, auth.RoleName{Role: role, DB: env.DB}, func(r auth.Role) ([]auth.Privilege, []auth.RoleName, error) {
		np, nr := r.Privileges, r.Roles
		if hasPrivs {
			np = privs
		}
		if hasRoles {
			nr = roles
		}
		return np, nr, nil
	})
	if err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

func runGrantPrivilegesToRole(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	return umcChangePrivileges(ctx, env, cmd, "grantPrivilegesToRole", true)
}

func runRevokePrivilegesFromRole(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	return umcChangePrivileges(ctx, env, cmd, "revokePrivilegesFromRole", false)
}

func umcChangePrivileges(ctx context.Context, env *service.Env, cmd bsoncore.Document, c string, grant bool) (bsoncore.Document, error) {
	role, err := umcName(cmd, "Role")
	if err != nil {
		return nil, err
	}
	v := lookup(cmd, "privileges")
	if v.Type == 0 {
		return nil, mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.privileges' is missing but a required field", c)
	}
	privs, err := auth.ParsePrivileges(v)
	if err != nil {
		return nil, err
	}
	if len(privs) == 0 {
		return nil, mongoerr.Newf(mongoerr.BadValue, "%s command requires a non-empty \"privileges\" array", c)
	}
	err = umcChangeRole(ctx, env, auth.RoleName{Role: role, DB: env.DB}, func(r auth.Role) ([]auth.Privilege, []auth.RoleName, error) {
		var set auth.Privileges
		for _, p := range r.Privileges {
			set.Add(p)
		}
		if grant {
			for _, p := range privs {
				set.Add(p)
			}
			return set.List(), r.Roles, nil
		}
		var out []auth.Privilege
		for _, p := range set.List() {
			for _, q := range privs {
				if q.Resource == p.Resource {
					p.Actions = p.Actions.Without(q.Actions)
				}
			}
			if !p.Actions.Empty() {
				out = append(out, p)
			}
		}
		return out, r.Roles, nil
	})
	if err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

func runGrantRolesToRole(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	return umcChangeRoleRoles(ctx, env, cmd, "grantRolesToRole", true)
}

func runRevokeRolesFromRole(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	return umcChangeRoleRoles(ctx, env, cmd, "revokeRolesFromRole", false)
}

func umcChangeRoleRoles(ctx context.Context, env *service.Env, cmd bsoncore.Document, c string, grant bool) (bsoncore.Document, error) {
	role, err := umcName(cmd, "Role")
	if err != nil {
		return nil, err
	}
	roles, err := umcRequireRoles(cmd, c, env.DB)
	if err != nil {
		return nil, err
	}
	if grant {
		if err := umcCheckRoles(ctx, env, roles); err != nil {
			return nil, err
		}
	}
	err = umcChangeRole(ctx, env, auth.RoleName{Role: role, DB: env.DB}, func(r auth.Role) ([]auth.Privilege, []auth.RoleName, error) {
		return r.Privileges, changeRoles(r.Roles, roles, grant), nil
	})
	if err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

func runDropRole(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	role, err := umcName(cmd, "Role")
	if err != nil {
		return nil, err
	}
	name := auth.RoleName{Role: role, DB: env.DB}
	if auth.IsBuiltinRole(name) {
		return nil, mongoerr.Newf(mongoerr.InvalidRoleModification, "Cannot drop built-in role: %s", name)
	}
	if err := umcDropOne(ctx, env, rolesNS, name.ID(), mongoerr.Newf(mongoerr.RoleNotFound, "Role %s not found", name)); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

func runDropAllRoles(ctx context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	return umcDropAll(ctx, env, rolesNS)
}

func runRolesInfo(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	names, all, err := service.ParseRolesArg(lookup(cmd, "rolesInfo"), env.DB)
	if err != nil {
		return nil, err
	}
	store := localUserStore{env.State}
	showPrivs := truthy(lookup(cmd, "showPrivileges"))
	if all {
		docs, err := aggScan(ctx, env.State.DB, rolesNS, bsoncore.NewDocumentBuilder().AppendString("db", env.DB).Build())
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			r, err := auth.ParseRole(d)
			if err != nil {
				return nil, err
			}
			names = append(names, r.Name)
		}
		if truthy(lookup(cmd, "showBuiltinRoles")) {
			for _, n := range auth.BuiltinRoleNames(env.DB) {
				names = append(names, auth.RoleName{Role: n, DB: env.DB})
			}
		}
		sort.Slice(names, func(i, j int) bool { return names[i].Role < names[j].Role })
	}
	lookupRole := func(r auth.RoleName) (auth.Role, bool, error) { return store.Role(ctx, r) }
	var b []byte
	ai, b := bsoncore.AppendArrayElementStart(b, "roles")
	i := 0
	for _, n := range names {
		var direct []auth.RoleName
		var own []auth.Privilege
		builtin := auth.IsBuiltinRole(n)
		if builtin {
			if n.Role == "__system" {
				continue
			}
			own, direct = auth.BuiltinGrants(n)
		} else {
			r, ok, err := store.Role(ctx, n)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			own, direct = r.Privileges, r.Roles
		}
		res, err := auth.Resolve(direct, lookupRole)
		if err != nil {
			return nil, err
		}
		di, b2 := bsoncore.AppendDocumentElementStart(b, itoa(int64(i)))
		i++
		b2 = bsoncore.AppendStringElement(b2, "_id", n.ID())
		b2 = bsoncore.AppendStringElement(b2, "role", n.Role)
		b2 = bsoncore.AppendStringElement(b2, "db", n.DB)
		b2 = bsoncore.AppendBooleanElement(b2, "isBuiltin", builtin)
		b2 = auth.AppendRoleNames(b2, "roles", direct)
		b2 = auth.AppendRoleNames(b2, "inheritedRoles", res.Roles)
		if showPrivs {
			var ownSet auth.Privileges
			for _, p := range own {
				ownSet.Add(p)
			}
			b2 = auth.AppendPrivileges(b2, "privileges", ownSet.List())
			ownSet.AddAll(res.Privileges)
			b2 = auth.AppendPrivileges(b2, "inheritedPrivileges", ownSet.List())
		}
		b, _ = bsoncore.AppendDocumentEnd(b2, di)
	}
	b, _ = bsoncore.AppendArrayEnd(b, ai)
	return doc(func(x []byte) []byte { return append(x, b...) }), nil
}

func runInvalidateUserCache(_ context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	env.State.Auth.Invalidate()
	return emptyDoc, nil
}
