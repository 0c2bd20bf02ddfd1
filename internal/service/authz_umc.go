package service

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
)

// The authorization checks of the user and role management commands, which humongod runs
// on its own users and humongos before forwarding to the config server (MongoDB's
// checkAuthForTypedCommand of user_management_commands).

// AuthRoles: act (grantRole, revokeRole) on the database of every role the command names.
func AuthRoles(act auth.Action) func(*AuthSession, string, bsoncore.Document) error {
	return func(s *AuthSession, db string, cmd bsoncore.Document) error {
		roles, err := auth.ParseRoleNames(lookupValue(cmd, "roles"), db)
		if err != nil {
			return err
		}
		for _, r := range roles {
			if !s.Allowed(auth.DB(r.DB), act) {
				return ErrNotAuthorized
			}
		}
		return nil
	}
}

func AuthCreateUser(s *AuthSession, db string, cmd bsoncore.Document) error {
	if !s.Allowed(auth.DB(db), auth.CreateUser) {
		return ErrNotAuthorized
	}
	return AuthRoles(auth.GrantRole)(s, db, cmd)
}

func AuthUpdateUser(s *AuthSession, db string, cmd bsoncore.Document) error {
	name, _ := lookupValue(cmd, "updateUser").StringValueOK()
	self := s.User != nil && *s.User == (auth.UserName{User: name, DB: db})
	if lookupValue(cmd, "pwd").Type != 0 && !s.Allowed(auth.DB(db), auth.ChangePassword) &&
		!(self && s.Allowed(auth.DB(db), auth.ChangeOwnPassword)) {
		return ErrNotAuthorized
	}
	if lookupValue(cmd, "customData").Type != 0 && !s.Allowed(auth.DB(db), auth.ChangeCustomData) &&
		!(self && s.Allowed(auth.DB(db), auth.ChangeOwnCustomData)) {
		return ErrNotAuthorized
	}
	if lookupValue(cmd, "roles").Type != 0 {
		if err := AuthRoles(auth.GrantRole)(s, db, cmd); err != nil {
			return err
		}
		return AuthRoles(auth.RevokeRole)(s, db, cmd)
	}
	return nil
}

// AuthUsersInfo: viewUser on the database, or on the cluster for forAllDBs; a user may
// always look at itself.
func AuthUsersInfo(s *AuthSession, db string, cmd bsoncore.Document) error {
	v := lookupValue(cmd, "usersInfo")
	if d, ok := v.DocumentOK(); ok && Truthy(d.Lookup("forAllDBs")) {
		if !s.Allowed(auth.Cluster(), auth.ViewUser) {
			return ErrNotAuthorized
		}
		return nil
	}
	if s.Allowed(auth.DB(db), auth.ViewUser) {
		return nil
	}
	names, _, err := ParseUsersArg(v, db)
	if err != nil {
		return err
	}
	for _, n := range names {
		if s.User == nil || *s.User != n {
			if !s.Allowed(auth.DB(n.DB), auth.ViewUser) {
				return ErrNotAuthorized
			}
		}
	}
	if len(names) == 0 {
		return ErrNotAuthorized
	}
	return nil
}

// ParseUsersArg reads usersInfo's argument: 1 (every user of db), a name, {user, db}, or an
// array of those. all is true for 1.
func ParseUsersArg(v bsoncore.Value, db string) (names []auth.UserName, all bool, err error) {
	one := func(x bsoncore.Value) (auth.UserName, error) {
		if s, ok := x.StringValueOK(); ok {
			return auth.UserName{User: s, DB: db}, nil
		}
		if d, ok := x.DocumentOK(); ok {
			u, ok1 := d.Lookup("user").StringValueOK()
			udb, ok2 := d.Lookup("db").StringValueOK()
			if ok1 && ok2 {
				return auth.UserName{User: u, DB: udb}, nil
			}
		}
		return auth.UserName{}, mongoerr.New(mongoerr.BadValue,
			"User name must be either a string or an object with 'user' and 'db' fields")
	}
	switch v.Type {
	case bsoncore.TypeArray:
		vals, _ := v.Array().Values()
		for _, x := range vals {
			n, err := one(x)
			if err != nil {
				return nil, false, err
			}
			names = append(names, n)
		}
		return names, false, nil
	case bsoncore.TypeString, bsoncore.TypeEmbeddedDocument:
		n, err := one(v)
		return []auth.UserName{n}, false, err
	}
	if f, ok := AsFloat(v); ok && f == 1 {
		return nil, true, nil
	}
	return nil, false, mongoerr.New(mongoerr.BadValue, "User name must be either a string or an object with 'user' and 'db' fields")
}

// AuthPrivileges: granting or revoking a privilege needs grantRole (revokeRole) on the
// database it is about (admin for cluster-wide ones), as MongoDB's
// checkAuthorizedToGrantPrivilege.
func AuthPrivileges(s *AuthSession, db string, cmd bsoncore.Document) error {
	v := lookupValue(cmd, "privileges")
	if v.Type == 0 {
		return nil
	}
	privs, err := auth.ParsePrivileges(v)
	if err != nil {
		return err
	}
	for _, p := range privs {
		target := auth.DB("admin")
		switch p.Resource.Kind {
		case auth.KindDB, auth.KindNS:
			target = auth.DB(p.Resource.DB)
		case auth.KindAnyNormal, auth.KindCollection:
			target = auth.AnyNormal()
		}
		if !s.Allowed(target, auth.GrantRole) {
			return ErrNotAuthorized
		}
	}
	return nil
}

func AuthCreateRole(s *AuthSession, db string, cmd bsoncore.Document) error {
	if !s.Allowed(auth.DB(db), auth.CreateRole) {
		return ErrNotAuthorized
	}
	if err := AuthRoles(auth.GrantRole)(s, db, cmd); err != nil {
		return err
	}
	return AuthPrivileges(s, db, cmd)
}

func AuthUpdateRole(s *AuthSession, db string, cmd bsoncore.Document) error {
	if !s.Allowed(auth.DB(db), auth.GrantRole, auth.RevokeRole) {
		return ErrNotAuthorized
	}
	if err := AuthRoles(auth.GrantRole)(s, db, cmd); err != nil {
		return err
	}
	return AuthPrivileges(s, db, cmd)
}

// AuthRolesInfo: viewRole on the database, or the roles the user has.
func AuthRolesInfo(s *AuthSession, db string, cmd bsoncore.Document) error {
	if s.Allowed(auth.DB(db), auth.ViewRole) {
		return nil
	}
	names, all, err := ParseRolesArg(lookupValue(cmd, "rolesInfo"), db)
	if err != nil {
		return err
	}
	if all {
		return ErrNotAuthorized
	}
	for _, n := range names {
		if !slices.Contains(s.Roles(), n) && !s.Allowed(auth.DB(n.DB), auth.ViewRole) {
			return ErrNotAuthorized
		}
	}
	return nil
}

// ParseRolesArg reads rolesInfo's argument: 1 (every role of db), a name, {role, db}, or an
// array of those.
func ParseRolesArg(v bsoncore.Value, db string) (names []auth.RoleName, all bool, err error) {
	switch v.Type {
	case bsoncore.TypeArray:
		rs, err := auth.ParseRoleNames(v, db)
		return rs, false, err
	case bsoncore.TypeString:
		return []auth.RoleName{{Role: v.StringValue(), DB: db}}, false, nil
	case bsoncore.TypeEmbeddedDocument:
		arr := bsoncore.NewArrayBuilder().AppendDocument(v.Document()).Build()
		rs, err := auth.ParseRoleNames(bsoncore.Value{Type: bsoncore.TypeArray, Data: arr}, db)
		return rs, false, err
	}
	if f, ok := AsFloat(v); ok && f == 1 {
		return nil, true, nil
	}
	return nil, false, mongoerr.New(mongoerr.BadValue, "Role name must be either a string or an object with 'role' and 'db' fields")
}
