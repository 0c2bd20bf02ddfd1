package auth

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// UserName names a user: name and authentication database.
type UserName struct{ User, DB string }

// ID is the user's _id in admin.system.users ("db.user").
func (u UserName) ID() string { return u.DB + "." + u.User }

// String is "user@db", as mongod's messages spell a user.
func (u UserName) String() string { return u.User + "@" + u.DB }

// RoleName names a role: name and the database it is defined on.
type RoleName struct{ Role, DB string }

// ID is the role's _id in admin.system.roles ("db.role").
func (r RoleName) ID() string { return r.DB + "." + r.Role }

// String is "role@db".
func (r RoleName) String() string { return r.Role + "@" + r.DB }

// User is an admin.system.users document.
type User struct {
	Name UserName
	// Doc is the stored document (usersInfo shows parts of it).
	Doc bsoncore.Document
	// Credentials by mechanism (SCRAM-SHA-1, SCRAM-SHA-256).
	Credentials map[string]Credential
	Roles       []RoleName
}

// Mechanisms are the SCRAM mechanisms the user has credentials for, in MongoDB's order.
func (u User) Mechanisms() []string {
	var out []string
	for _, m := range []string{MechSCRAMSHA1, MechSCRAMSHA256} {
		if _, ok := u.Credentials[m]; ok {
			out = append(out, m)
		}
	}
	return out
}

// ParseUser reads an admin.system.users document.
func ParseUser(d bsoncore.Document) (User, error) {
	u := User{Doc: d, Credentials: map[string]Credential{}}
	var ok bool
	if u.Name.User, ok = d.Lookup("user").StringValueOK(); !ok {
		return User{}, mongoerr.New(mongoerr.FailedToParse, "User document needs 'user' field to be a string")
	}
	if u.Name.DB, ok = d.Lookup("db").StringValueOK(); !ok {
		return User{}, mongoerr.New(mongoerr.FailedToParse, "User document needs 'db' field to be a string")
	}
	if cd, ok := d.Lookup("credentials").DocumentOK(); ok {
		for _, m := range []string{MechSCRAMSHA1, MechSCRAMSHA256} {
			if c, ok := cd.Lookup(m).DocumentOK(); ok {
				cred, err := parseCredential(c)
				if err != nil {
					return User{}, err
				}
				u.Credentials[m] = cred
			}
		}
	}
	roles, err := ParseRoleNames(d.Lookup("roles"), "")
	if err != nil {
		return User{}, err
	}
	u.Roles = roles
	return u, nil
}

// ParseRoleNames reads a roles array of {role, db} documents or, when defaultDB is set,
// plain names on defaultDB (createUser's and grantRolesToUser's shorthand).
func ParseRoleNames(v bsoncore.Value, defaultDB string) ([]RoleName, error) {
	if v.Type == 0 {
		return nil, nil
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.TypeMismatch, "\"roles\" field must be an array")
	}
	vals, _ := arr.Values()
	out := make([]RoleName, 0, len(vals))
	for _, rv := range vals {
		if s, ok := rv.StringValueOK(); ok && defaultDB != "" {
			out = append(out, RoleName{Role: s, DB: defaultDB})
			continue
		}
		rd, ok := rv.DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.BadValue, "Role names must be either strings or objects")
		}
		role, ok1 := rd.Lookup("role").StringValueOK()
		db, ok2 := rd.Lookup("db").StringValueOK()
		if !ok1 || !ok2 {
			return nil, mongoerr.New(mongoerr.BadValue, "Role name objects must have 'role' and 'db' string fields")
		}
		out = append(out, RoleName{Role: role, DB: db})
	}
	return out, nil
}

// AppendRoleNames appends roles as an array field key of {role, db} documents.
func AppendRoleNames(b []byte, key string, roles []RoleName) []byte {
	ai, b := bsoncore.AppendArrayElementStart(b, key)
	for i, r := range roles {
		di, b2 := bsoncore.AppendDocumentElementStart(b, itoa(i))
		b2 = bsoncore.AppendStringElement(b2, "role", r.Role)
		b2 = bsoncore.AppendStringElement(b2, "db", r.DB)
		b, _ = bsoncore.AppendDocumentEnd(b2, di)
	}
	b, _ = bsoncore.AppendArrayEnd(b, ai)
	return b
}

// AppendUserNames appends users as an array field key of {user, db} documents
// (connectionStatus' authenticatedUsers, currentOp's effectiveUsers).
func AppendUserNames(b []byte, key string, users []UserName) []byte {
	ai, b := bsoncore.AppendArrayElementStart(b, key)
	for i, u := range users {
		di, b2 := bsoncore.AppendDocumentElementStart(b, itoa(i))
		b2 = bsoncore.AppendStringElement(b2, "user", u.User)
		b2 = bsoncore.AppendStringElement(b2, "db", u.DB)
		b, _ = bsoncore.AppendDocumentEnd(b2, di)
	}
	b, _ = bsoncore.AppendArrayEnd(b, ai)
	return b
}

// Role is an admin.system.roles document: a user-defined role.
type Role struct {
	Name       RoleName
	Doc        bsoncore.Document
	Privileges []Privilege
	Roles      []RoleName
}

// ParseRole reads an admin.system.roles document.
func ParseRole(d bsoncore.Document) (Role, error) {
	r := Role{Doc: d}
	var ok bool
	if r.Name.Role, ok = d.Lookup("role").StringValueOK(); !ok {
		return Role{}, mongoerr.New(mongoerr.FailedToParse, "Role document needs 'role' field to be a string")
	}
	if r.Name.DB, ok = d.Lookup("db").StringValueOK(); !ok {
		return Role{}, mongoerr.New(mongoerr.FailedToParse, "Role document needs 'db' field to be a string")
	}
	if v := d.Lookup("privileges"); v.Type != 0 {
		privs, err := ParsePrivileges(v)
		if err != nil {
			return Role{}, err
		}
		r.Privileges = privs
	}
	roles, err := ParseRoleNames(d.Lookup("roles"), "")
	if err != nil {
		return Role{}, err
	}
	r.Roles = roles
	return r, nil
}

// RoleLookup finds a user-defined role (ok false when it does not exist).
type RoleLookup func(RoleName) (r Role, ok bool, err error)

// Resolved is what a set of granted roles amounts to.
type Resolved struct {
	Privileges Privileges
	// Roles are every role reached, granted ones first, then inherited ones in discovery
	// order (each once).
	Roles []RoleName
}

// Resolve walks the role graph from roles: built-in roles from the tables, user-defined ones
// through lookup. Roles that do not exist are skipped (MongoDB ignores a grant of a role that
// was dropped); a cycle ends where it closes.
func Resolve(roles []RoleName, lookup RoleLookup) (Resolved, error) {
	var out Resolved
	seen := map[RoleName]bool{}
	queue := append([]RoleName(nil), roles...)
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		if seen[r] {
			continue
		}
		seen[r] = true
		if privs, sub, ok := builtinPrivileges(r); ok {
			out.Roles = append(out.Roles, r)
			for _, p := range privs {
				out.Privileges.Add(p)
			}
			queue = append(queue, sub...)
			continue
		}
		if lookup == nil {
			continue
		}
		role, ok, err := lookup(r)
		if err != nil {
			return Resolved{}, err
		}
		if !ok {
			continue
		}
		out.Roles = append(out.Roles, r)
		for _, p := range role.Privileges {
			out.Privileges.Add(p)
		}
		queue = append(queue, role.Roles...)
	}
	return out, nil
}

// ValidName reports whether s may name a user or role: non-empty, no NUL, and (roles) no '@'
// mongod refuses.
func ValidName(s string) bool { return s != "" && !strings.ContainsRune(s, 0) }
