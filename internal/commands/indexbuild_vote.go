package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/catalog"
	"humongo/internal/mongoerr"
	"humongo/internal/repl/indexbuild"
	"humongo/internal/service"
)

func addVoteCommitIndexBuild(r *service.Registry) {
	add(r, &service.Command{
		Name:      "voteCommitIndexBuild",
		Auth:      service.AuthInternal,
		Handler:   runVoteCommitIndexBuild,
		Help:      "internal: a member reports that it is ready to commit an index build",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
	})
	add(r, &service.Command{
		Name:      "setIndexCommitQuorum",
		Auth:      service.AuthOnNS(auth.CreateIndex),
		Handler:   runSetIndexCommitQuorum,
		Help:      "changes the commit quorum of a running index build",
		Secondary: service.SecondaryNever,
	})
}

// runVoteCommitIndexBuild is {voteCommitIndexBuild: <build UUID>, hostAndPort: "<host:port>"}:
// a member tells the primary it finished its build's scan (spec "Commit Quorum"). The vote
// is counted towards the build's commit quorum (in memory; see repl/indexbuild).
func runVoteCommitIndexBuild(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	const c = "voteCommitIndexBuild"
	if err := checkStrict(cmd, c, "hostAndPort"); err != nil {
		return nil, err
	}
	v := lookup(cmd, c)
	st, b, ok := v.BinaryOK()
	if !ok || st != 4 || len(b) != 16 {
		return nil, typeMismatch(c, c, v.Type, "uuid")
	}
	var id catalog.UUID
	copy(id[:], b)
	hv := lookup(cmd, "hostAndPort")
	if hv.Type == 0 {
		return nil, mongoerr.New(codeMissingField, "BSON field 'voteCommitIndexBuild.hostAndPort' is missing but a required field")
	}
	host, ok := hv.StringValueOK()
	if !ok {
		return nil, typeMismatch(c, "hostAndPort", hv.Type, "string")
	}
	if env.State.Repl != nil {
		if err := env.State.Repl.CheckCanAcceptWrites("admin"); err != nil {
			return nil, err
		}
	}
	co := indexbuild.Of(db)
	co.Attach(env.State.Repl)
	if err := co.Vote(id, host); err != nil {
		return nil, err
	}
	db.Log.Info("received voteCommitIndexBuild", "c", "INDEX", "buildUUID", id.String(), "host", host)
	return doc(func(b []byte) []byte { return b }), nil
}

// runSetIndexCommitQuorum is {setIndexCommitQuorum: coll, indexNames: [...], commitQuorum}:
// it changes the commit quorum of the running build of exactly those indexes.
func runSetIndexCommitQuorum(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	db, err := ddlStorage(env)
	if err != nil {
		return nil, err
	}
	const c = "setIndexCommitQuorum"
	if err := checkStrict(cmd, c, "indexNames", "commitQuorum"); err != nil {
		return nil, err
	}
	ns, err := ddlCollectionNS(env, cmd)
	if err != nil {
		return nil, err
	}
	nv := lookup(cmd, "indexNames")
	if nv.Type == 0 {
		return nil, mongoerr.New(codeMissingField, "BSON field 'setIndexCommitQuorum.indexNames' is missing but a required field")
	}
	arr, ok := nv.ArrayOK()
	if !ok {
		return nil, typeMismatch(c, "indexNames", nv.Type, "array")
	}
	vals, _ := arr.Values()
	names := map[string]bool{}
	for _, v := range vals {
		s, ok := v.StringValueOK()
		if !ok {
			return nil, typeMismatch(c, "indexNames", v.Type, "string")
		}
		names[s] = true
	}
	qv := lookup(cmd, "commitQuorum")
	if qv.Type == 0 {
		return nil, mongoerr.New(codeMissingField, "BSON field 'setIndexCommitQuorum.commitQuorum' is missing but a required field")
	}
	q, err := indexbuild.ParseCommitQuorum(qv)
	if err != nil {
		return nil, err
	}
	if _, ok := indexbuild.Replicated(db); !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "Standalones can't specify commitQuorum")
	}
	co := indexbuild.Of(db)
	co.Attach(env.State.Repl)
	if err := co.CheckQuorum(q); err != nil {
		return nil, err
	}
	m, ok := db.Catalog.Latest().ByNS(ns)
	if !ok {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound, "ns %s does not exist", ns)
	}
	for _, b := range db.Colls.IndexBuilds().ForCollection(m.UUID) {
		bn := b.Names()
		if len(bn) != len(names) {
			continue
		}
		match := true
		for _, n := range bn {
			match = match && names[n]
		}
		if match {
			co.SetCommitQuorum(b, q)
			return doc(func(b []byte) []byte { return b }), nil
		}
	}
	return nil, mongoerr.Newf(mongoerr.IndexNotFound, "Cannot find an index build on collection '%s' with the provided index names", ns)
}
