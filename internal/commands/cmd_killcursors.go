package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func addKillCursors(r *service.Registry) {
	add(r, &service.Command{
		Name:      "killCursors",
		Auth:      service.AuthAnyUser,
		Handler:   runKillCursors,
		Help:      "kill a list of cursors",
		Secondary: service.SecondaryAlways,
	})
}

func runKillCursors(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	const name = "killCursors"
	if err := checkStrict(cmd, name, "cursors"); err != nil {
		return nil, err
	}
	ns, err := findCollName(env, name, commandArg(cmd))
	if err != nil {
		return nil, err
	}
	cv := lookup(cmd, "cursors")
	if cv.Type == 0 {
		return nil, mongoerr.Newf(codeMissingField, "BSON field 'killCursors.cursors' is missing but a required field")
	}
	if cv.Type != bsoncore.TypeArray {
		return nil, typeMismatch(name, "cursors", cv.Type, "array")
	}
	vals, err := bsoncore.Array(cv.Data).Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid cursors array: %v", err)
	}
	m := env.State.Cursors()
	var ids, wrongNS []int64
	for i, v := range vals {
		if v.Type != bsoncore.TypeInt64 {
			return nil, typeMismatch(name, "cursors."+itoa(int64(i)), v.Type, "long")
		}
		id := v.Int64()
		if c, ok := m.Get(id); ok && c.NS != ns {
			// A cursor of another namespace is not this command's to kill.
			wrongNS = append(wrongNS, id)
			continue
		}
		ids = append(ids, id)
	}
	if err := service.CheckKillCursors(env, cmd, ns, ids); err != nil {
		return nil, err
	}
	killed, notFound, alive, unknown := m.Kill(ids)
	notFound = append(notFound, wrongNS...)
	return doc(func(b []byte) []byte {
		b = killCursorsAppendIDs(b, "cursorsKilled", killed)
		b = killCursorsAppendIDs(b, "cursorsNotFound", notFound)
		b = killCursorsAppendIDs(b, "cursorsAlive", alive)
		return killCursorsAppendIDs(b, "cursorsUnknown", unknown)
	}), nil
}

func killCursorsAppendIDs(b []byte, key string, ids []int64) []byte {
	idx, b := bsoncore.AppendArrayElementStart(b, key)
	for i, id := range ids {
		b = bsoncore.AppendInt64Element(b, itoa(int64(i)), id)
	}
	b, _ = bsoncore.AppendArrayEnd(b, idx)
	return b
}
