package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
	"humongo/internal/txn/lsc"
)

func addKillAllSessions(r *service.Registry) {
	add(r, &service.Command{
		Name:         "killAllSessions",
		Handler:      runKillAllSessions,
		Help:         "kill all logical sessions, for a user, and their operations",
		Secondary:    service.SecondaryAlways,
		RequiresAuth: true,
	})
	add(r, &service.Command{
		Name:         "killAllSessionsByPattern",
		Handler:      runKillAllSessionsByPattern,
		Help:         "kill logical sessions by pattern",
		Secondary:    service.SecondaryAlways,
		RequiresAuth: true,
	})
}

// runKillAllSessions takes [{user, db}, ...]; an empty array kills every session.
func runKillAllSessions(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	pats, err := arrayOfDocs("killAllSessions", commandArg(cmd))
	if err != nil {
		return nil, err
	}
	var uids [][32]byte
	for _, p := range pats {
		user, ok := lookup(p, "user").StringValueOK()
		if !ok {
			return nil, mongoerr.New(codeMissingField, "BSON field 'KillAllSessionsUser.user' is missing but a required field")
		}
		db, ok := lookup(p, "db").StringValueOK()
		if !ok {
			return nil, mongoerr.New(codeMissingField, "BSON field 'KillAllSessionsUser.db' is missing but a required field")
		}
		uids = append(uids, lsc.UIDOf(user+"@"+db))
	}
	killByUIDs(env, uids, len(pats) == 0)
	return emptyDoc, nil
}

// runKillAllSessionsByPattern takes [{lsid: ...} | {uid: BinData} | {}, ...]; an empty array
// or an empty pattern kills every session.
func runKillAllSessionsByPattern(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	pats, err := arrayOfDocs("killAllSessionsByPattern", commandArg(cmd))
	if err != nil {
		return nil, err
	}
	all := len(pats) == 0
	var keys []lsc.Key
	var uids [][32]byte
	for _, p := range pats {
		switch {
		case lookup(p, "lsid").Type != 0:
			k, err := service.ParseLsid(lookup(p, "lsid"))
			if err != nil {
				return nil, err
			}
			keys = append(keys, k)
		case lookup(p, "uid").Type != 0:
			_, u, ok := lookup(p, "uid").BinaryOK()
			if !ok || len(u) != 32 {
				return nil, mongoerr.New(mongoerr.BadValue, "uid must be a 32-byte binary field")
			}
			var uid [32]byte
			copy(uid[:], u)
			uids = append(uids, uid)
		default:
			all = true
		}
	}
	env.State.Sessions.End(keys)
	killByUIDs(env, uids, all)
	return emptyDoc, nil
}

func killByUIDs(env *service.Env, uids [][32]byte, all bool) {
	env.State.Sessions.KillMatching(func(r lsc.Record) bool {
		if all {
			return true
		}
		for _, u := range uids {
			if r.Key.UID == u {
				return true
			}
		}
		return false
	})
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
