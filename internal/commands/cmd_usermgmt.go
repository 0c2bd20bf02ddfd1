package commands

import (
	"context"
	"slices"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/storage"
)

// The user management commands (MongoDB's user_management_commands): users in
// admin.system.users with SCRAM credentials, read by the server's user cache
// (service.Auth), which every change here invalidates.

func addUserManagement(r *service.Registry) {
	for _, c := range []*service.Command{
		{Name: "createUser", Handler: runCreateUser, Writes: true, Auth: service.AuthCreateUser,
			Help: "Adds a user to the system"},
		{Name: "updateUser", Handler: runUpdateUser, Writes: true, Auth: service.AuthUpdateUser,
			Help: "Used to update a user, for example to change its password"},
		{Name: "dropUser", Handler: runDropUser, Writes: true, Auth: service.AuthOnDB(auth.DropUser),
			Help: "Drops a single user."},
		{Name: "dropAllUsersFromDatabase", Handler: runDropAllUsers, Writes: true, Auth: service.AuthOnDB(auth.DropUser),
			Help: "Drops all users for a single database."},
		{Name: "usersInfo", Handler: runUsersInfo, Secondary: service.SecondaryOptIn, Auth: service.AuthUsersInfo,
			Help: "Returns information about users."},
		{Name: "grantRolesToUser", Handler: runGrantRolesToUser, Writes: true, Auth: service.AuthRoles(auth.GrantRole),
			Help: "Grants roles to a user."},
		{Name: "revokeRolesFromUser", Handler: runRevokeRolesFromUser, Writes: true, Auth: service.AuthRoles(auth.RevokeRole),
			Help: "Revokes roles from a user."},
	} {
		if c.Writes {
			c.Handler = umcWithWriteConcern(c.Handler)
		}
		add(r, c)
	}
	addRoleManagement(r)
}

// umcWithWriteConcern makes a user or role change wait for the command's write concern (the
// server's default when it names none), as mongod's user management commands do: createUser
// with w: "majority" returns once a majority has the user.
func umcWithWriteConcern(h service.Handler) service.Handler {
	return func(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
		wc, err := writeParseConcern(env, cmd)
		if err != nil {
			return nil, err
		}
		reply, err := h(ctx, env, cmd)
		if err != nil {
			return nil, err
		}
		return writeFinish(ctx, env, wc, reply)
	}
}

// umcName reads the command's first field: the user or role name.
func umcName(cmd bsoncore.Document, what string) (string, error) {
	first, err := cmd.IndexErr(0)
	if err != nil {
		return "", mongoerr.New(mongoerr.FailedToParse, "Empty command document")
	}
	s, ok := first.Value().StringValueOK()
	if !ok {
		return "", typeMismatch(first.Key(), first.Key(), first.Value().Type, "string")
	}
	if s == "" {
		return "", mongoerr.Newf(mongoerr.BadValue, "%s name must not be empty", what)
	}
	if strings.ContainsRune(s, 0) {
		return "", mongoerr.Newf(mongoerr.BadValue, "%s names must not contain a NUL byte", what)
	}
	return s, nil
}

// umcWrite runs f on ns (admin.system.users or admin.system.roles) in one unit of work,
// creating the collection on first use, then drops the cached users.
func umcWrite(ctx context.Context, env *service.Env, ns string, f func(ru *storage.RecoveryUnit, coll *index.Collection) error) error {
	db, err := ddlStorage(env)
	if err != nil {
		return err
	}
	op := db.NewOp(ctx)
	defer op.Close()
	err = op.WriteCollection(ctx, ns, true, func(coll *index.Collection) error { return f(op.RU, coll) })
	env.State.Auth.Invalidate()
	return err
}

func idValue(id string) bsoncore.Value {
	return bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, id)}
}

// umcCheckRoles fails with RoleNotFound unless every role exists.
func umcCheckRoles(ctx context.Context, env *service.Env, roles []auth.RoleName) error {
	for _, r := range roles {
		if auth.IsBuiltinRole(r) {
			continue
		}
		_, ok, err := localUserStore{env.State}.Role(ctx, r)
		if err != nil {
			return err
		}
		if !ok {
			return mongoerr.Newf(mongoerr.RoleNotFound, "Could not find role: %s", r)
		}
	}
	return nil
}

// umcMechanisms reads the mechanisms argument (default: the enabled SCRAM mechanisms).
func umcMechanisms(env *service.Env, cmd bsoncore.Document, c string) ([]string, error) {
	enabled := strings.Split(env.State.Params.String("authenticationMechanisms"), ",")
	v := lookup(cmd, "mechanisms")
	if v.Type == 0 {
		var out []string
		for _, m := range []string{auth.MechSCRAMSHA1, auth.MechSCRAMSHA256} {
			if slices.Contains(enabled, m) {
				out = append(out, m)
			}
		}
		return out, nil
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, typeMismatch(c, "mechanisms", v.Type, "array")
	}
	vals, _ := arr.Values()
	var out []string
	for _, mv := range vals {
		m, ok := mv.StringValueOK()
		if !ok {
			return nil, typeMismatch(c, "mechanisms", mv.Type, "string")
		}
		if m != auth.MechSCRAMSHA1 && m != auth.MechSCRAMSHA256 {
			return nil, mongoerr.Newf(mongoerr.BadValue, "Unknown auth mechanism '%s'", m)
		}
		if !slices.Contains(enabled, m) {
			return nil, mongoerr.Newf(mongoerr.BadValue, "Unknown auth mechanism '%s'", m)
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "mechanisms field must not be empty")
	}
	return out, nil
}

// umcCredentials derives the credentials of a new password for mechs.
func umcCredentials(env *service.Env, cmd bsoncore.Document, c string, name auth.UserName, mechs []string) (map[string]auth.Credential, error) {
	pv := lookup(cmd, "pwd")
	pwd, ok := pv.StringValueOK()
	if !ok {
		return nil, typeMismatch(c, "pwd", pv.Type, "string")
	}
	if pwd == "" {
		return nil, mongoerr.New(mongoerr.BadValue, "Password must not be empty")
	}
	digest := true
	if v := lookup(cmd, "digestPassword"); v.Type != 0 {
		digest = truthy(v)
	}
	creds := map[string]auth.Credential{}
	for _, m := range mechs {
		var prepared string
		switch {
		case m == auth.MechSCRAMSHA256 && !digest:
			return nil, mongoerr.New(mongoerr.BadValue, "Use of SCRAM-SHA-256 requires undigested passwords")
		case m == auth.MechSCRAMSHA1 && !digest:
			prepared = pwd // the client sent the SHA-1 digest itself
		default:
			p, err := auth.PreparePassword(m, name.User, pwd)
			if err != nil {
				return nil, err
			}
			prepared = p
		}
		iters := int(env.State.Params.Int("scramIterationCount"))
		if m == auth.MechSCRAMSHA256 {
			iters = int(env.State.Params.Int("scramSHA256IterationCount"))
		}
		cred, err := auth.MakeCredential(m, prepared, iters)
		if err != nil {
			return nil, err
		}
		creds[m] = cred
	}
	return creds, nil
}

// userDoc builds an admin.system.users document.
func userDoc(userID bsoncore.Value, name auth.UserName, creds map[string]auth.Credential, roles []auth.RoleName, custom bsoncore.Document) bsoncore.Document {
	return doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "_id", name.ID())
		b = bsoncore.AppendValueElement(b, "userId", userID)
		b = bsoncore.AppendStringElement(b, "user", name.User)
		b = bsoncore.AppendStringElement(b, "db", name.DB)
		idx, b := bsoncore.AppendDocumentElementStart(b, "credentials")
		for _, m := range []string{auth.MechSCRAMSHA1, auth.MechSCRAMSHA256} {
			if c, ok := creds[m]; ok {
				b = c.AppendDoc(b, m)
			}
		}
		b, _ = bsoncore.AppendDocumentEnd(b, idx)
		if custom != nil {
			b = bsoncore.AppendDocumentElement(b, "customData", custom)
		}
		return auth.AppendRoleNames(b, "roles", roles)
	})
}

func umcCustomData(cmd bsoncore.Document, c string) (bsoncore.Document, error) {
	v := lookup(cmd, "customData")
	if v.Type == 0 {
		return nil, nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		return nil, typeMismatch(c, "customData", v.Type, "object")
	}
	return d, nil
}

func umcRequireRoles(cmd bsoncore.Document, c, db string) ([]auth.RoleName, error) {
	v := lookup(cmd, "roles")
	if v.Type == 0 {
		return nil, mongoerr.Newf(mongoerr.Location40414, "BSON field '%s.roles' is missing but a required field", c)
	}
	return auth.ParseRoleNames(v, db)
}

func runCreateUser(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const c = "createUser"
	user, err := umcName(cmd, "User")
	if err != nil {
		return nil, err
	}
	name := auth.UserName{User: user, DB: env.DB}
	switch env.DB {
	case "local":
		return nil, mongoerr.New(mongoerr.BadValue, "Cannot create users in the local database")
	case "$external":
		return nil, mongoerr.New(mongoerr.BadValue, "Cannot create users in the $external database: no external authentication mechanism is enabled")
	}
	if lookup(cmd, "pwd").Type == 0 {
		return nil, mongoerr.New(mongoerr.BadValue,
			"Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db")
	}
	roles, err := umcRequireRoles(cmd, c, env.DB)
	if err != nil {
		return nil, err
	}
	custom, err := umcCustomData(cmd, c)
	if err != nil {
		return nil, err
	}
	mechs, err := umcMechanisms(env, cmd, c)
	if err != nil {
		return nil, err
	}
	creds, err := umcCredentials(env, cmd, c, name, mechs)
	if err != nil {
		return nil, err
	}
	if err := umcCheckRoles(ctx, env, roles); err != nil {
		return nil, err
	}
	uid := catalog.NewUUID()
	d := userDoc(bsoncore.Value{Type: bsoncore.TypeBinary, Data: bsoncore.AppendBinary(nil, 4, uid[:])}, name, creds, roles, custom)
	err = umcWrite(ctx, env, usersNS, func(ru *storage.RecoveryUnit, coll *index.Collection) error {
		_, _, found, err := coll.FindByID(ru, idValue(name.ID()))
		if err != nil {
			return err
		}
		if found {
			return mongoerr.Newf(mongoerr.Location51003, "User \"%s\" already exists", name)
		}
		_, err = coll.InsertDocument(ru, d)
		return err
	})
	if err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

// umcUpdateUser replaces user name's document with change(old) (UserNotFound when missing).
func umcUpdateUser(ctx context.Context, env *service.Env, name auth.UserName, change func(u auth.User) (bsoncore.Document, error)) error {
	return umcWrite(ctx, env, usersNS, func(ru *storage.RecoveryUnit, coll *index.Collection) error {
		rid, old, found, err := coll.FindByID(ru, idValue(name.ID()))
		if err != nil {
			return err
		}
		if !found {
			return mongoerr.Newf(mongoerr.UserNotFound, "Could not find user \"%s\"", name)
		}
		u, err := auth.ParseUser(old)
		if err != nil {
			return err
		}
		nd, err := change(u)
		if err != nil {
			return err
		}
		return coll.UpdateDocument(ru, rid, old, nd)
	})
}

func runUpdateUser(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const c = "updateUser"
	user, err := umcName(cmd, "User")
	if err != nil {
		return nil, err
	}
	name := auth.UserName{User: user, DB: env.DB}
	var roles []auth.RoleName
	if v := lookup(cmd, "roles"); v.Type != 0 {
		if roles, err = auth.ParseRoleNames(v, env.DB); err != nil {
			return nil, err
		}
		if err := umcCheckRoles(ctx, env, roles); err != nil {
			return nil, err
		}
	}
	custom, err := umcCustomData(cmd, c)
	if err != nil {
		return nil, err
	}
	if lookup(cmd, "pwd").Type == 0 && lookup(cmd, "roles").Type == 0 && custom == nil &&
		lookup(cmd, "mechanisms").Type == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "Must specify at least one field to update in updateUser")
	}
	var creds map[string]auth.Credential
	if lookup(cmd, "pwd").Type != 0 {
		mechs, err := umcMechanisms(env, cmd, c)
		if err != nil {
			return nil, err
		}
		if creds, err = umcCredentials(env, cmd, c, name, mechs); err != nil {
			return nil, err
		}
	} else if lookup(cmd, "mechanisms").Type != 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "Must provide a 'pwd' field to change mechanisms")
	}
	err = umcUpdateUser(ctx, env, name, func(u auth.User) (bsoncore.Document, error) {
		nc, nr, ncd := u.Credentials, u.Roles, lookup(u.Doc, "customData").Document()
		if creds != nil {
			nc = creds
		}
		if lookup(cmd, "roles").Type != 0 {
			nr = roles
		}
		if custom != nil {
			ncd = custom
		}
		if lookup(u.Doc, "customData").Type == 0 && custom == nil {
			ncd = nil
		}
		return userDoc(lookup(u.Doc, "userId"), name, nc, nr, ncd), nil
	})
	if err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

func runGrantRolesToUser(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	return umcChangeUserRoles(ctx, env, cmd, "grantRolesToUser", true)
}

func runRevokeRolesFromUser(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	return umcChangeUserRoles(ctx, env, cmd, "revokeRolesFromUser", false)
}

func umcChangeUserRoles(ctx context.Context, env *service.Env, cmd bsoncore.Document, c string, grant bool) (bsoncore.Document, error) {
	user, err := umcName(cmd, "User")
	if err != nil {
		return nil, err
	}
	name := auth.UserName{User: user, DB: env.DB}
	roles, err := umcRequireRoles(cmd, c, env.DB)
	if err != nil {
		return nil, err
	}
	if len(roles) == 0 {
		return nil, mongoerr.Newf(mongoerr.BadValue, "%s command requires a non-empty \"roles\" array", c)
	}
	if grant {
		if err := umcCheckRoles(ctx, env, roles); err != nil {
			return nil, err
		}
	}
	err = umcUpdateUser(ctx, env, name, func(u auth.User) (bsoncore.Document, error) {
		nr := changeRoles(u.Roles, roles, grant)
		var custom bsoncore.Document
		if d, ok := lookup(u.Doc, "customData").DocumentOK(); ok {
			custom = d
		}
		return userDoc(lookup(u.Doc, "userId"), name, u.Credentials, nr, custom), nil
	})
	if err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

func runDropUser(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	user, err := umcName(cmd, "User")
	if err != nil {
		return nil, err
	}
	name := auth.UserName{User: user, DB: env.DB}
	if err := umcDropOne(ctx, env, usersNS, name.ID(), mongoerr.Newf(mongoerr.UserNotFound, "User \"%s\" not found", name)); err != nil {
		return nil, err
	}
	return emptyDoc, nil
}

func runDropAllUsers(ctx context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	return umcDropAll(ctx, env, usersNS)
}

// changeRoles returns current with roles granted (added once) or revoked.
func changeRoles(current, roles []auth.RoleName, grant bool) []auth.RoleName {
	out := slices.Clone(current)
	for _, r := range roles {
		i := slices.Index(out, r)
		switch {
		case grant && i < 0:
			out = append(out, r)
		case !grant && i >= 0:
			out = slices.Delete(out, i, i+1)
		}
	}
	return out
}

// umcDropOne deletes the document id of ns (admin.system.users or admin.system.roles), or
// fails with notFound.
func umcDropOne(ctx context.Context, env *service.Env, ns, id string, notFound error) error {
	return umcWrite(ctx, env, ns, func(ru *storage.RecoveryUnit, coll *index.Collection) error {
		rid, old, found, err := coll.FindByID(ru, idValue(id))
		if err != nil {
			return err
		}
		if !found {
			return notFound
		}
		return coll.DeleteDocument(ru, rid, old)
	})
}

// umcDropAll deletes the documents of ns that belong to the command's database and answers
// {n: <how many>}.
func umcDropAll(ctx context.Context, env *service.Env, ns string) (bsoncore.Document, error) {
	docs, err := aggScan(ctx, env.State.DB, ns, bsoncore.NewDocumentBuilder().AppendString("db", env.DB).Build())
	if err != nil {
		return nil, err
	}
	n := 0
	err = umcWrite(ctx, env, ns, func(ru *storage.RecoveryUnit, coll *index.Collection) error {
		n = 0
		for _, d := range docs {
			rid, old, found, err := coll.FindByID(ru, lookup(d, "_id"))
			if err != nil {
				return err
			}
			if found {
				if err := coll.DeleteDocument(ru, rid, old); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return doc(func(b []byte) []byte { return bsoncore.AppendInt32Element(b, "n", int32(n)) }), nil
}

func runUsersInfo(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	v := lookup(cmd, "usersInfo")
	var filter bsoncore.Document
	var names []auth.UserName
	if d, ok := v.DocumentOK(); ok && d.Lookup("forAllDBs").Type != 0 {
		if !truthy(d.Lookup("forAllDBs")) {
			return nil, mongoerr.New(mongoerr.BadValue, "forAllDBs must be true")
		}
	} else {
		var all bool
		var err error
		names, all, err = service.ParseUsersArg(v, env.DB)
		if err != nil {
			return nil, err
		}
		if all {
			filter = bsoncore.NewDocumentBuilder().AppendString("db", env.DB).Build()
		}
	}
	showCreds := truthy(lookup(cmd, "showCredentials"))
	showPrivs := truthy(lookup(cmd, "showPrivileges"))
	showCustom := true
	if x := lookup(cmd, "showCustomData"); x.Type != 0 {
		showCustom = truthy(x)
	}
	var docs []bsoncore.Document
	if names != nil {
		for _, n := range names {
			u, ok, err := localUserStore{env.State}.User(ctx, n)
			if err != nil {
				return nil, err
			}
			if ok {
				docs = append(docs, u.Doc)
			}
		}
	} else {
		var err error
		if docs, err = aggScan(ctx, env.State.DB, usersNS, filter); err != nil {
			return nil, err
		}
	}
	if f, ok := lookup(cmd, "filter").DocumentOK(); ok {
		m, err := writeParseFilter(f, nil)
		if err != nil {
			return nil, err
		}
		docs = slices.DeleteFunc(docs, func(d bsoncore.Document) bool { ok, _ := m.Matches(d); return !ok })
	}
	sort.Slice(docs, func(i, j int) bool {
		a, _ := lookup(docs[i], "_id").StringValueOK()
		b, _ := lookup(docs[j], "_id").StringValueOK()
		return a < b
	})
	var b []byte
	ai, b := bsoncore.AppendArrayElementStart(b, "users")
	for i, d := range docs {
		u, err := auth.ParseUser(d)
		if err != nil {
			return nil, err
		}
		di, b2 := bsoncore.AppendDocumentElementStart(b, itoa(int64(i)))
		for _, k := range []string{"_id", "userId", "user", "db"} {
			if x := lookup(d, k); x.Type != 0 {
				b2 = bsoncore.AppendValueElement(b2, k, x)
			}
		}
		if x := lookup(d, "customData"); x.Type != 0 && showCustom {
			b2 = bsoncore.AppendValueElement(b2, "customData", x)
		}
		b2 = auth.AppendRoleNames(b2, "roles", u.Roles)
		if showCreds {
			if x := lookup(d, "credentials"); x.Type != 0 {
				b2 = bsoncore.AppendValueElement(b2, "credentials", x)
			}
		}
		if showPrivs {
			res, err := auth.Resolve(u.Roles, func(r auth.RoleName) (auth.Role, bool, error) {
				return localUserStore{env.State}.Role(ctx, r)
			})
			if err != nil {
				return nil, err
			}
			b2 = auth.AppendRoleNames(b2, "inheritedRoles", res.Roles)
			b2 = auth.AppendPrivileges(b2, "inheritedPrivileges", res.Privileges.List())
			b2 = bsoncore.AppendArrayElement(b2, "inheritedAuthenticationRestrictions", bsoncore.NewArrayBuilder().Build())
		}
		b2 = appendStrings(b2, "mechanisms", u.Mechanisms())
		b, _ = bsoncore.AppendDocumentEnd(b2, di)
	}
	b, _ = bsoncore.AppendArrayEnd(b, ai)
	return doc(func(x []byte) []byte { return append(x, b...) }), nil
}
