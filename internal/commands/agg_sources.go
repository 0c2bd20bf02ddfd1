package commands

// Server-dependent source stages (issue 6 item 1): $collStats, $indexStats, $listCatalog,
// $currentOp, $listLocalSessions and $planCacheStats read server state the agg engine does
// not know, so the command layer runs them as the pipeline's first stage and feeds their
// documents to the rest of the pipeline (agg has no stage registration hook).

import (
	"context"
	"os"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// aggServerStages are the stage names handled here.
var aggServerStages = map[string]bool{
	"$collStats": true, "$indexStats": true, "$listCatalog": true, "$currentOp": true,
	"$listLocalSessions": true, "$planCacheStats": true,
}

// aggServerStage reports whether st is one of the server source stages, with its spec.
func aggServerStage(st bsoncore.Document) (name string, spec bsoncore.Document, ok bool) {
	el, err := st.IndexErr(0)
	if err != nil || !aggServerStages[el.Key()] {
		return "", nil, false
	}
	if d, ok := el.Value().DocumentOK(); ok {
		spec = d
	}
	return el.Key(), spec, true
}

// aggRunServerStage checks where stage name may run and produces its documents.
func aggRunServerStage(ctx context.Context, env *service.Env, r *aggRequest, name string, spec bsoncore.Document) ([]bsoncore.Document, error) {
	if spec == nil {
		return nil, mongoerr.Newf(mongoerr.FailedToParse, "%s must be specified as an object", name)
	}
	switch name {
	case "$currentOp":
		if !r.collectionless || r.db != "admin" {
			return nil, mongoerr.New(mongoerr.InvalidNamespace,
				"$currentOp must be run against the 'admin' database with {aggregate: 1}")
		}
		return aggCurrentOp(env, spec), nil
	case "$listLocalSessions":
		if !r.collectionless {
			return nil, mongoerr.New(mongoerr.InvalidNamespace,
				"$listLocalSessions must be run against the database with {aggregate: 1}, not a collection")
		}
		return aggListLocalSessions(env, spec)
	case "$listCatalog":
		if r.collectionless && r.db != "admin" {
			return nil, mongoerr.New(mongoerr.InvalidNamespace,
				"$listCatalog must be run against the 'admin' database with {aggregate: 1}")
		}
		return aggListCatalog(ctx, env, r)
	}
	if r.collectionless {
		return nil, mongoerr.Newf(mongoerr.InvalidNamespace,
			"{aggregate: 1} is not valid for '%s'; a collection is required.", name)
	}
	backing, _, isView, err := viewResolve(ctx, env, r.ns)
	if err != nil {
		return nil, err
	}
	// A view has latency statistics but no storage of its own.
	if isView && (name != "$collStats" || lookup(spec, "storageStats").Type != 0 || lookup(spec, "count").Type != 0) {
		return nil, mongoerr.Newf(mongoerr.CommandNotSupportedOnView, "Namespace %s is a view, not a collection", r.ns)
	}
	meta, _ := env.State.DB.Catalog.Latest().ByNS(backing)
	switch name {
	case "$collStats":
		return aggCollStats(env, r.ns, meta, spec)
	case "$indexStats":
		return aggIndexStats(env, meta), nil
	}
	return nil, nil // $planCacheStats: no plan cache yet, an empty result of the right kind
}

func aggHost(env *service.Env) string {
	if env.State.Host != "" {
		return env.State.Host
	}
	h, _ := os.Hostname()
	return h
}

// aggLiteParse checks a stage's spec before the pipeline's shape, as MongoDB's LiteParsed
// stages do for every stage when the request is parsed.
func aggLiteParse(st bsoncore.Document) error {
	if el, err := st.IndexErr(0); err == nil && el.Key() == "$collStats" {
		return aggCollStatsSpec(st)
	}
	return nil
}

// aggCollStatsSpec checks a $collStats stage the way DocumentSourceCollStats::LiteParsed does:
// an object (5447000), then DocumentSourceCollStatsSpec's strict IDL (unknown fields 40415,
// types 14, storageStats.scale {gte: 1} 51024). Null and undefined count as absent, as in IDL.
func aggCollStatsSpec(stage bsoncore.Document) error {
	el, err := stage.IndexErr(0)
	if err != nil {
		return mongoerr.Newf(mongoerr.InvalidBSON, "invalid stage: %v", err)
	}
	spec, ok := el.Value().DocumentOK()
	if !ok {
		shown := index.FormatDoc(stage)
		shown = strings.TrimSuffix(strings.TrimPrefix(shown, "{ "), " }")
		return mongoerr.Newf(mongoerr.Location5447000, "$collStats must take a nested object but found: %s", shown)
	}
	els, err := spec.Elements()
	if err != nil {
		return mongoerr.Newf(mongoerr.InvalidBSON, "invalid $collStats: %v", err)
	}
	seen := map[string]bool{}
	for _, e := range els {
		k, v := e.Key(), e.Value()
		switch k {
		case "latencyStats", "storageStats", "count", "queryExecStats", "$_requestOnTimeseriesView":
		default:
			return mongoerr.Newf(codeUnknownField, "BSON field '$collStats.%s' is an unknown field.", k)
		}
		if seen[k] {
			return mongoerr.Newf(mongoerr.Location40413, "BSON field '$collStats.%s' is a duplicate field", k)
		}
		seen[k] = true
		if v.Type == bsoncore.TypeNull || v.Type == bsoncore.TypeUndefined {
			continue
		}
		if k == "$_requestOnTimeseriesView" {
			if v.Type != bsoncore.TypeBoolean {
				return typeMismatch("$collStats", k, v.Type, "bool")
			}
			continue
		}
		d, ok := v.DocumentOK()
		if !ok {
			return typeMismatch("$collStats", k, v.Type, "object")
		}
		switch k {
		case "count", "queryExecStats":
			if len(d) > 5 { // validateObjectIsEmpty
				return mongoerr.Newf(mongoerr.Location31170, "expected an empty object, but got %s", index.FormatDoc(d))
			}
		case "storageStats":
			sv := lookup(d, "scale")
			if sv.Type == 0 || sv.Type == bsoncore.TypeNull || sv.Type == bsoncore.TypeUndefined {
				continue
			}
			n, err := intArg("$collStats.storageStats", "scale", sv)
			if err != nil {
				return err
			}
			if n < 1 {
				return mongoerr.Newf(mongoerr.Location51024, "BSON field 'scale' value must be >= 1, actual value '%d'", n)
			}
		}
	}
	return nil
}

// aggCollStats is $collStats: one document with the sections the spec asks for.
func aggCollStats(env *service.Env, ns string, m *catalog.CollectionMeta, spec bsoncore.Document) ([]bsoncore.Document, error) {
	needColl := lookup(spec, "storageStats").Type != 0 || lookup(spec, "count").Type != 0
	if needColl && m == nil {
		return nil, mongoerr.Newf(mongoerr.NamespaceNotFound,
			"Unable to retrieve storageStats in $collStats stage :: caused by :: Collection [%s] not found.", ns)
	}
	db := env.State.DB
	d := doc(func(b []byte) []byte {
		b = bsoncore.AppendStringElement(b, "ns", ns)
		b = bsoncore.AppendStringElement(b, "host", aggHost(env))
		b = bsoncore.AppendDateTimeElement(b, "localTime", time.Now().UnixMilli())
		if ls := lookup(spec, "latencyStats"); ls.Type != 0 {
			li, bb := bsoncore.AppendDocumentElementStart(b, "latencyStats")
			for _, k := range []string{"reads", "writes", "commands", "transactions"} {
				ki, b2 := bsoncore.AppendDocumentElementStart(bb, k)
				b2 = bsoncore.AppendInt64Element(b2, "latency", 0)
				b2 = bsoncore.AppendInt64Element(b2, "ops", 0)
				if truthy(lookup(ls.Document(), "histograms")) {
					b2 = bsoncore.AppendArrayElement(b2, "histogram", bsoncore.NewArrayBuilder().Build())
				}
				bb, _ = bsoncore.AppendDocumentEnd(b2, ki)
			}
			b, _ = bsoncore.AppendDocumentEnd(bb, li)
		}
		if ss := lookup(spec, "storageStats"); ss.Type != 0 {
			scale := int64(1)
			if sv := lookup(ss.Document(), "scale"); sv.Type != 0 {
				if n, ok := sv.AsInt64OK(); ok && n > 0 {
					scale = n
				}
			}
			count, dataSize, storageSize, indexTotal, names, per := ddlCollectionSizes(db, m)
			si, bb := bsoncore.AppendDocumentElementStart(b, "storageStats")
			bb = ddlAppendNumber(bb, "size", dataSize/scale)
			bb = ddlAppendNumber(bb, "count", count)
			if count > 0 {
				bb = ddlAppendNumber(bb, "avgObjSize", dataSize/count)
			}
			bb = ddlAppendNumber(bb, "numOrphanDocs", 0)
			bb = ddlAppendNumber(bb, "storageSize", storageSize/scale)
			bb = ddlAppendNumber(bb, "freeStorageSize", 0)
			bb = bsoncore.AppendBooleanElement(bb, "capped", m.Capped)
			if m.Capped {
				// mongosh's stats() (and so rs.printReplicationInfo) reads maxSize here.
				bb = appendCappedLimits(bb, db, m, scale)
			}
			bb = ddlAppendNumber(bb, "nindexes", int64(len(names)))
			bb = ddlAppendNumber(bb, "totalIndexSize", indexTotal/scale)
			bb = ddlAppendNumber(bb, "totalSize", (storageSize+indexTotal)/scale)
			ii, b2 := bsoncore.AppendDocumentElementStart(bb, "indexSizes")
			for i, n := range names {
				b2 = ddlAppendNumber(b2, n, per[i]/scale)
			}
			bb, _ = bsoncore.AppendDocumentEnd(b2, ii)
			bb = ddlAppendNumber(bb, "scaleFactor", scale)
			b, _ = bsoncore.AppendDocumentEnd(bb, si)
		}
		if lookup(spec, "count").Type != 0 {
			n, _ := db.Engine.Counts(m.Ident)
			b = bsoncore.AppendInt64Element(b, "count", n)
		}
		if lookup(spec, "queryExecStats").Type != 0 {
			qi, bb := bsoncore.AppendDocumentElementStart(b, "queryExecStats")
			ci, b2 := bsoncore.AppendDocumentElementStart(bb, "collectionScans")
			b2 = bsoncore.AppendInt64Element(b2, "total", 0)
			b2 = bsoncore.AppendInt64Element(b2, "nonTailable", 0)
			bb, _ = bsoncore.AppendDocumentEnd(b2, ci)
			b, _ = bsoncore.AppendDocumentEnd(bb, qi)
		}
		return b
	})
	return []bsoncore.Document{d}, nil
}

// aggIndexStats is $indexStats: one document per index. accesses counts the executions of
// query plans that read the index since its in-memory access method was created (process
// start, or the index's creation or rebuild): plan.Executor counts them (index/usage.go).
// An index still building has no access method yet: ops 0 since now.
func aggIndexStats(env *service.Env, m *catalog.CollectionMeta) []bsoncore.Document {
	if m == nil {
		return nil
	}
	var out []bsoncore.Document
	coll, _ := env.State.DB.Colls.ByUUID(m.UUID)
	for i := range m.Indexes {
		im := &m.Indexes[i]
		var ops int64
		since := time.Now()
		if coll != nil && im.Ready {
			if ix, ok, _ := coll.Index(im.Name); ok {
				if n, t := ix.Accesses(); !t.IsZero() {
					ops, since = n, t
				}
			}
		}
		out = append(out, doc(func(b []byte) []byte {
			b = bsoncore.AppendStringElement(b, "name", im.Name)
			b = bsoncore.AppendDocumentElement(b, "key", im.KeyPattern)
			b = bsoncore.AppendStringElement(b, "host", aggHost(env))
			ai, bb := bsoncore.AppendDocumentElementStart(b, "accesses")
			bb = bsoncore.AppendInt64Element(bb, "ops", ops)
			bb = bsoncore.AppendDateTimeElement(bb, "since", since.UnixMilli())
			b, _ = bsoncore.AppendDocumentEnd(bb, ai)
			b = bsoncore.AppendDocumentElement(b, "spec", im.Spec)
			if !im.Ready {
				b = bsoncore.AppendBooleanElement(b, "building", true)
			}
			return b
		}))
	}
	return out
}

// aggListCatalog is $listCatalog: the durable catalog entries (all of them for
// collectionless admin, else the one collection), plus the views from system.views.
func aggListCatalog(ctx context.Context, env *service.Env, r *aggRequest) ([]bsoncore.Document, error) {
	snap := env.State.DB.Catalog.Latest()
	var metas []*catalog.CollectionMeta
	if r.collectionless {
		metas = snap.All()
	} else if m, ok := snap.ByNS(r.ns); ok {
		metas = append(metas, m)
	}
	var out []bsoncore.Document
	dbs := map[string]bool{}
	for _, m := range metas {
		dbs[m.DB()] = true
		out = append(out, doc(func(b []byte) []byte {
			b = bsoncore.AppendStringElement(b, "db", m.DB())
			b = bsoncore.AppendStringElement(b, "name", m.Coll())
			b = bsoncore.AppendStringElement(b, "type", "collection")
			mi, bb := bsoncore.AppendDocumentElementStart(b, "md")
			bb = bsoncore.AppendStringElement(bb, "ns", m.NS)
			bb = bsoncore.AppendDocumentElement(bb, "options", m.Options)
			ai, bb := bsoncore.AppendArrayElementStart(bb, "indexes")
			for i := range m.Indexes {
				im := &m.Indexes[i]
				ii, b2 := bsoncore.AppendDocumentElementStart(bb, itoa(int64(i)))
				b2 = bsoncore.AppendDocumentElement(b2, "spec", im.Spec)
				b2 = bsoncore.AppendBooleanElement(b2, "ready", im.Ready)
				b2 = bsoncore.AppendBooleanElement(b2, "multikey", im.Multikey)
				bb, _ = bsoncore.AppendDocumentEnd(b2, ii)
			}
			bb, _ = bsoncore.AppendArrayEnd(bb, ai)
			b, _ = bsoncore.AppendDocumentEnd(bb, mi)
			ii, b := bsoncore.AppendDocumentElementStart(b, "idxIdent")
			for i := range m.Indexes {
				b = bsoncore.AppendStringElement(b, m.Indexes[i].Name, m.Indexes[i].Ident)
			}
			b, _ = bsoncore.AppendDocumentEnd(b, ii)
			b = bsoncore.AppendStringElement(b, "ns", m.NS)
			b = bsoncore.AppendStringElement(b, "ident", m.Ident)
			return b
		}))
	}
	for dbName := range dbs {
		if !r.collectionless && dbName+"."+viewsColl != r.ns {
			continue
		}
		defs, err := aggScan(ctx, env.State.DB, dbName+"."+viewsColl, nil)
		if err != nil {
			return nil, err
		}
		for _, d := range defs {
			id := lookup(d, "_id").StringValue()
			_, name, _ := strings.Cut(id, ".")
			out = append(out, doc(func(b []byte) []byte {
				b = bsoncore.AppendStringElement(b, "db", dbName)
				b = bsoncore.AppendStringElement(b, "name", name)
				b = bsoncore.AppendStringElement(b, "type", "view")
				b = bsoncore.AppendStringElement(b, "ns", id)
				b = bsoncore.AppendValueElement(b, "_id", lookup(d, "_id"))
				b = bsoncore.AppendValueElement(b, "viewOn", lookup(d, "viewOn"))
				b = bsoncore.AppendValueElement(b, "pipeline", lookup(d, "pipeline"))
				return b
			}))
		}
	}
	return out, nil
}

// aggCurrentOp is $currentOp: currentOp's documents ({allUsers, idleConnections} honoured;
// idleConnections adds connections without an operation).
func aggCurrentOp(env *service.Env, spec bsoncore.Document) []bsoncore.Document {
	idle := truthy(lookup(spec, "idleConnections"))
	// Without allUsers only the user's own operations are listed (the check asked for
	// inprog only with it).
	allUsers := truthy(lookup(spec, "allUsers"))
	host := aggHost(env)
	now := time.Now()
	var out []bsoncore.Document
	for _, c := range env.State.Clients.Conns() {
		op, meta, app := c.Snapshot()
		if op == nil && !idle {
			continue
		}
		if !allUsers && !ownsConn(env.Auth, c) {
			continue
		}
		out = append(out, currentOpDoc(host, now, c, op, meta, app))
	}
	return out
}

// aggListLocalSessions is $listLocalSessions: the sessions cached on this server.
func aggListLocalSessions(env *service.Env, spec bsoncore.Document) ([]bsoncore.Document, error) {
	uids, err := listSessionsUIDs(env, "$listLocalSessions", spec)
	if err != nil {
		return nil, err
	}
	if env.State.Sessions == nil {
		return nil, nil
	}
	recs := env.State.Sessions.Records()
	out := make([]bsoncore.Document, 0, len(recs))
	for _, r := range recs {
		if uids != nil && !slices.Contains(uids, r.Key.UID) {
			continue
		}
		out = append(out, doc(func(b []byte) []byte {
			ii, bb := bsoncore.AppendDocumentElementStart(b, "_id")
			bb = bsoncore.AppendBinaryElement(bb, "id", 4, r.Key.ID[:])
			bb = bsoncore.AppendBinaryElement(bb, "uid", 0, r.Key.UID[:])
			b, _ = bsoncore.AppendDocumentEnd(bb, ii)
			b = bsoncore.AppendDateTimeElement(b, "lastUse", r.LastUse.UnixMilli())
			if r.User != "" {
				b = bsoncore.AppendStringElement(b, "user", r.User)
			}
			return b
		}))
	}
	return out, nil
}

// listSessionsUIDs parses a $listLocalSessions spec (ListSessionsSpec) and returns the
// session uids it lists: nil for allUsers, the digests of users, or else the current user's
// (the unauthenticated digest without one: every session when authorization is off).
func listSessionsUIDs(env *service.Env, stage string, spec bsoncore.Document) ([][32]byte, error) {
	elems, err := spec.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid %s spec: %v", stage, err)
	}
	var allUsers bool
	var users []auth.UserName
	for _, e := range elems {
		switch e.Key() {
		case "allUsers":
			if e.Value().Type != bsoncore.TypeBoolean {
				return nil, typeMismatch("ListSessionsSpec", "allUsers", e.Value().Type, "bool")
			}
			allUsers = e.Value().Boolean()
		case "users":
			arr, ok := e.Value().ArrayOK()
			if !ok {
				return nil, typeMismatch("ListSessionsSpec", "users", e.Value().Type, "array")
			}
			vals, _ := arr.Values()
			for _, v := range vals {
				d, ok := v.DocumentOK()
				if !ok {
					return nil, typeMismatch("ListSessionsSpec.users", "users", v.Type, "object")
				}
				var u auth.UserName
				for _, f := range []struct {
					name string
					to   *string
				}{{"user", &u.User}, {"db", &u.DB}} {
					fv := d.Lookup(f.name)
					if fv.Type == 0 {
						return nil, mongoerr.Newf(mongoerr.Location40414, "BSON field 'ListSessionsSpec.users.%s' is missing but a required field", f.name)
					}
					str, ok := fv.StringValueOK()
					if !ok {
						return nil, typeMismatch("ListSessionsSpec.users", f.name, fv.Type, "string")
					}
					*f.to = str
				}
				users = append(users, u)
			}
		case "$_internalPredicate":
		default:
			return nil, mongoerr.Newf(mongoerr.Location40415, "BSON field 'ListSessionsSpec.%s' is an unknown field.", e.Key())
		}
	}
	if allUsers && len(users) > 0 {
		return nil, mongoerr.Newf(mongoerr.UnsupportedFormat, "%s may not specify {allUsers:true} and {users:[...]} at the same time", stage)
	}
	switch {
	case allUsers:
		return nil, nil
	case len(users) == 0:
		return env.Auth.OwnSessionUIDs(), nil
	}
	uids := make([][32]byte, len(users))
	for i, u := range users {
		uids[i] = service.UserDigest(u)
	}
	return uids, nil
}
