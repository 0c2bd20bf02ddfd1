package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/txn/lsc"
)

func addKillAllSessions(r *service.Registry) {
	add(r, &service.Command{
		Name:      "killAllSessions",
		Auth:      service.AuthOnCluster(auth.KillAnySession),
		Handler:   runKillAllSessions,
		Help:      "kill all logical sessions, for a user, and their operations",
		Secondary: service.SecondaryAlways,
	})
	add(r, &service.Command{
		Name:      "killAllSessionsByPattern",
		Auth:      service.AuthKillAllSessionsByPattern,
		Handler:   runKillAllSessionsByPattern,
		Help:      "kill logical sessions by pattern",
		Secondary: service.SecondaryAlways,
	})
}

// runKillAllSessions takes [{user, db}, ...] and kills those users' sessions (uid =
// SHA-256 of "user@db"); an empty array kills every session. Killing interrupts the
// sessions' running operations, kills their cursors and aborts their transactions.
func runKillAllSessions(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	pats, err := arrayOfDocs("killAllSessions", commandArg(cmd))
	if err != nil {
		return nil, err
	}
	m := newSessionMatcher()
	m.all = len(pats) == 0
	for _, p := range pats {
		user, db, err := parseUserPattern(p, "KillAllSessionsUser", "user")
		if err != nil {
			return nil, err
		}
		m.uids[lsc.UIDOf(user+"@"+db)] = true
	}
	killSessions(env, m)
	return emptyDoc, nil
}

// runKillAllSessionsByPattern takes [{lsid: LogicalSessionId} | {uid: BinData} |
// {users: [{user, db}], roles: [{role, db}]} | {}, ...]. A pattern with uid selects that
// user's sessions, else one with lsid that session, else (only impersonation data, or
// nothing) every session; an empty array kills every session. users and roles are the
// impersonation data of an authenticated caller: accepted and validated, no filter.
func runKillAllSessionsByPattern(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	pats, err := arrayOfDocs("killAllSessionsByPattern", commandArg(cmd))
	if err != nil {
		return nil, err
	}
	m := newSessionMatcher()
	m.all = len(pats) == 0
	for _, p := range pats {
		elems, err := p.Elements()
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid pattern: %v", err)
		}
		var uid *[32]byte
		var lsid *lsc.Key
		for _, e := range elems {
			switch e.Key() {
			case "uid":
				_, u, ok := e.Value().BinaryOK()
				if !ok {
					return nil, typeMismatch("KillAllSessionsByPattern", "uid", e.Value().Type, "binData")
				}
				if len(u) != 32 {
					// SHA256Block::fromBinData.
					return nil, mongoerr.Newf(mongoerr.UnsupportedFormat, "Unsupported SHA256Block hash length: %d", len(u))
				}
				var x [32]byte
				copy(x[:], u)
				uid = &x
			case "lsid":
				k, err := service.ParseLsid(e.Value())
				if err != nil {
					return nil, err
				}
				lsid = &k
			case "users":
				users, err := arrayOfDocs("users", e.Value())
				if err != nil {
					return nil, err
				}
				for _, u := range users {
					if _, _, err := parseUserPattern(u, "KillAllSessionsUser", "user"); err != nil {
						return nil, err
					}
				}
				if len(users) > 1 {
					return nil, mongoerr.New(mongoerr.BadValue, "Too many users in impersonation data")
				}
			case "roles":
				roles, err := arrayOfDocs("roles", e.Value())
				if err != nil {
					return nil, err
				}
				for _, r := range roles {
					if _, _, err := parseUserPattern(r, "KillAllSessionsRole", "role"); err != nil {
						return nil, err
					}
				}
			default:
				return nil, mongoerr.Newf(mongoerr.Location40415,
					"BSON field 'KillAllSessionsByPattern.%s' is an unknown field.", e.Key())
			}
		}
		switch {
		case uid != nil:
			m.uids[*uid] = true
		case lsid != nil:
			m.lsids[*lsid] = true
		default:
			m.all = true
		}
	}
	killSessions(env, m)
	return emptyDoc, nil
}

// parseUserPattern parses {<nameField>: string, db: string} (KillAllSessionsUser or
// KillAllSessionsRole).
func parseUserPattern(p bsoncore.Document, typ, nameField string) (name, db string, err error) {
	elems, err := p.Elements()
	if err != nil {
		return "", "", mongoerr.Newf(mongoerr.InvalidBSON, "invalid %s: %v", typ, err)
	}
	var haveName, haveDB bool
	for _, e := range elems {
		switch e.Key() {
		case nameField, "db":
			s, ok := e.Value().StringValueOK()
			if !ok {
				return "", "", typeMismatch(typ, e.Key(), e.Value().Type, "string")
			}
			if e.Key() == "db" {
				db, haveDB = s, true
			} else {
				name, haveName = s, true
			}
		default:
			return "", "", mongoerr.Newf(mongoerr.Location40415, "BSON field '%s.%s' is an unknown field.", typ, e.Key())
		}
	}
	if !haveName {
		return "", "", mongoerr.Newf(codeMissingField, "BSON field '%s.%s' is missing but a required field", typ, nameField)
	}
	if !haveDB {
		return "", "", mongoerr.Newf(codeMissingField, "BSON field '%s.db' is missing but a required field", typ)
	}
	return name, db, nil
}

func arrayOfDocs(cmdName string, v bsoncore.Value) ([]bsoncore.Document, error) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, typeMismatch(cmdName, cmdName, v.Type, "array")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid %s array: %v", cmdName, err)
	}
	out := make([]bsoncore.Document, 0, len(vals))
	for _, x := range vals {
		d, ok := x.DocumentOK()
		if !ok {
			return nil, typeMismatch(cmdName, cmdName, x.Type, "object")
		}
		out = append(out, d)
	}
	return out, nil
}
