package service

// The authorization checks more than one role registers (MongoDB's checkAuthForOperation and
// doCheckAuthorization, with the privileges of MongoDB 7.0's commands): the helpers every
// registration uses (a fixed action set on the cluster, the command's database or its
// namespace), the CRUD and DDL checks both humongod and humongos run, aggregate's walk over
// its pipeline (getPrivilegesForAggregate and each stage's requiredPrivileges), and the
// cursor ownership checks of getMore and killCursors.
//
// A check sees the command before its handler parses it. Where the command is malformed in
// a way the check cannot read (a pipeline that is not an array, a stage that is not a
// document), the check asks for the privileges of the well-formed part and leaves the
// error to the handler: it never allows more than a well-formed command would need.

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
)

// AuthCheck is a command's authorization check (Command.Auth).
type AuthCheck = func(s *AuthSession, db string, cmd bsoncore.Document) error

// allowed turns a privilege test into a check's result.
func allowed(ok bool) error {
	if !ok {
		return ErrNotAuthorized
	}
	return nil
}

// AllowedAll reports whether the session holds every privilege of privs.
func (s *AuthSession) AllowedAll(privs []auth.Privilege) bool {
	if s == nil || !s.Enabled || s.Bypass {
		return true
	}
	for _, p := range privs {
		if !s.privs.Allows(p.Resource, p.Actions) {
			return false
		}
	}
	return true
}

// AuthAnyUser is the check of commands MongoDB requires no privilege for: any
// authenticated user may run them (startSession, commitTransaction, whatsmyuri, ...), or
// the handler checks what it touches itself (getMore's cursor, killOp's operation).
func AuthAnyUser(*AuthSession, string, bsoncore.Document) error { return nil }

// AuthInternal is the check of the commands members send each other (replSetHeartbeat,
// _configsvr*, _shardsvr*, _recvChunk*, ...): internal on the cluster, which only
// __system (the keyfile's user) holds.
var AuthInternal = AuthOnCluster(auth.Internal)

// AuthOnCluster: acts on the cluster resource.
func AuthOnCluster(acts ...auth.Action) AuthCheck {
	return func(s *AuthSession, _ string, _ bsoncore.Document) error {
		return allowed(s.Allowed(auth.Cluster(), acts...))
	}
}

// AuthOnDB: acts on the command's database.
func AuthOnDB(acts ...auth.Action) AuthCheck {
	return func(s *AuthSession, db string, _ bsoncore.Document) error {
		return allowed(s.Allowed(auth.DB(db), acts...))
	}
}

// AuthOnNS: acts on the collection the command's first field names (in its database).
func AuthOnNS(acts ...auth.Action) AuthCheck {
	return func(s *AuthSession, db string, cmd bsoncore.Document) error {
		return allowed(s.Allowed(CommandNS(db, cmd), acts...))
	}
}

// AuthOnFullNS: acts on the namespace the command's first field spells in full ("db.coll",
// or a database alone), as the admin commands of sharding take it (shardCollection,
// moveChunk, split, dataSize, ...).
func AuthOnFullNS(acts ...auth.Action) AuthCheck {
	return func(s *AuthSession, _ string, cmd bsoncore.Document) error {
		return allowed(s.Allowed(FullNS(cmd), acts...))
	}
}

// CommandNS is the resource of the collection a command's first field names in db. A
// first field that is not a collection name (a UUID, {aggregate: 1}, a wrong type) stands
// for the whole database: the check then asks for the action on every collection of it,
// never less than the named collection would need.
func CommandNS(db string, cmd bsoncore.Document) auth.Resource {
	if coll, ok := firstValue(cmd).StringValueOK(); ok && coll != "" {
		return auth.NS(db, coll)
	}
	return auth.DB(db)
}

// FullNS is the resource of a fully qualified namespace in the command's first field.
func FullNS(cmd bsoncore.Document) auth.Resource {
	if ns, ok := firstValue(cmd).StringValueOK(); ok && ns != "" {
		return auth.NSFromFull(ns)
	}
	// Nothing to name: only a privilege on every resource covers it, and the handler
	// refuses the command anyway.
	return auth.AnyResource()
}

func firstValue(cmd bsoncore.Document) bsoncore.Value {
	e, err := cmd.IndexErr(0)
	if err != nil {
		return bsoncore.Value{}
	}
	return e.Value()
}

// nsResource is the resource of a collection named in db by v ("coll"), or of v's
// {db, coll} document form ($out, $merge, $lookup's from); ok is false when v names none.
func nsResource(db string, v bsoncore.Value) (r auth.Resource, ok bool) {
	if coll, ok := v.StringValueOK(); ok && coll != "" {
		return auth.NS(db, coll), true
	}
	if d, ok := v.DocumentOK(); ok {
		if odb, ok := d.Lookup("db").StringValueOK(); ok && odb != "" {
			db = odb
		}
		if coll, ok := d.Lookup("coll").StringValueOK(); ok && coll != "" {
			return auth.NS(db, coll), true
		}
	}
	return auth.Resource{}, false
}

// bypassActions adds bypassDocumentValidation to acts when the command asks for it.
func bypassActions(cmd bsoncore.Document, acts ...auth.Action) []auth.Action {
	if Truthy(cmd.Lookup("bypassDocumentValidation")) {
		acts = append(acts, auth.BypassDocumentValidation)
	}
	return acts
}

// AuthFind: find on the namespace; a term (a secondary's oplog fetcher) needs internal.
func AuthFind(s *AuthSession, db string, cmd bsoncore.Document) error {
	if cmd.Lookup("term").Type != 0 && !s.Allowed(auth.Cluster(), auth.Internal) {
		return ErrNotAuthorized
	}
	return allowed(s.Allowed(CommandNS(db, cmd), auth.Find))
}

// AuthInsert: insert on the namespace (checkAuthForWriteCommand).
func AuthInsert(s *AuthSession, db string, cmd bsoncore.Document) error {
	return allowed(s.Allowed(CommandNS(db, cmd), bypassActions(cmd, auth.Insert)...))
}

// AuthUpdate: update on the namespace, and insert when a statement upserts.
func AuthUpdate(s *AuthSession, db string, cmd bsoncore.Document) error {
	acts := bypassActions(cmd, auth.Update)
	if arr, ok := cmd.Lookup("updates").ArrayOK(); ok {
		vals, _ := arr.Values()
		for _, v := range vals {
			if d, ok := v.DocumentOK(); ok && Truthy(d.Lookup("upsert")) {
				acts = append(acts, auth.Insert)
				break
			}
		}
	}
	return allowed(s.Allowed(CommandNS(db, cmd), acts...))
}

// AuthDelete: remove on the namespace.
func AuthDelete(s *AuthSession, db string, cmd bsoncore.Document) error {
	return allowed(s.Allowed(CommandNS(db, cmd), bypassActions(cmd, auth.Remove)...))
}

// AuthFindAndModify: find, plus update for an update, remove for a remove and insert for
// an upsert (CmdFindAndModify's doCheckAuthorization).
func AuthFindAndModify(s *AuthSession, db string, cmd bsoncore.Document) error {
	acts := bypassActions(cmd, auth.Find)
	if cmd.Lookup("update").Type != 0 {
		acts = append(acts, auth.Update)
	}
	if Truthy(cmd.Lookup("upsert")) {
		acts = append(acts, auth.Insert)
	}
	if Truthy(cmd.Lookup("remove")) {
		acts = append(acts, auth.Remove)
	}
	return allowed(s.Allowed(CommandNS(db, cmd), acts...))
}

// AuthGetMore: getMore needs no privilege of its own (the handler checks the cursor's
// owner with CheckGetMore); a term (a secondary's oplog fetcher) needs internal.
func AuthGetMore(s *AuthSession, _ string, cmd bsoncore.Document) error {
	if cmd.Lookup("term").Type != 0 {
		return allowed(s.Allowed(auth.Cluster(), auth.Internal))
	}
	return nil
}

// AuthAggregate is aggregate's check: the privileges of its pipeline (getPrivilegesForAggregate).
// mongos is true on the router, where $currentOp over the shards needs inprog.
func AuthAggregate(mongos bool) AuthCheck {
	return func(s *AuthSession, db string, cmd bsoncore.Document) error {
		coll, _ := firstValue(cmd).StringValueOK()
		pipeline, _ := cmd.Lookup("pipeline").ArrayOK()
		p := aggPrivs{db: db, bypass: Truthy(cmd.Lookup("bypassDocumentValidation")), mongos: mongos, user: s.User}
		p.pipeline(coll, pipeline, true)
		return allowed(s.AllowedAll(p.out))
	}
}

// aggInitialSources are the stages that produce documents instead of reading the
// collection (LiteParsedDocumentSource::isInitialSource): a pipeline starting with one
// needs no find on the namespace it runs against.
var aggInitialSources = map[string]bool{
	"$changeStream": true, "$collStats": true, "$currentOp": true, "$documents": true,
	"$indexStats": true, "$listCatalog": true, "$listCachedAndActiveUsers": true,
	"$listLocalSessions": true, "$listSampledQueries": true, "$listSearchIndexes": true,
	"$listSessions": true, "$planCacheStats": true, "$queryStats": true,
	"$shardedDataDistribution": true,
}

// aggPrivs gathers the privileges of a pipeline and its sub-pipelines.
type aggPrivs struct {
	db     string
	bypass bool
	mongos bool
	user   *auth.UserName
	out    []auth.Privilege
}

func (p *aggPrivs) add(r auth.Resource, acts ...auth.Action) {
	p.out = append(p.out, auth.Privilege{Resource: r, Actions: auth.Actions(acts...)})
}

// stageName returns a stage's name and spec (ok false for a malformed stage).
func stageName(v bsoncore.Value) (name string, spec bsoncore.Value, ok bool) {
	d, ok := v.DocumentOK()
	if !ok {
		return "", bsoncore.Value{}, false
	}
	e, err := d.IndexErr(0)
	if err != nil {
		return "", bsoncore.Value{}, false
	}
	return e.Key(), e.Value(), true
}

// startsWithInitialSource reports whether pipeline's first stage is an initial source.
func startsWithInitialSource(pipeline bsoncore.Array) bool {
	v, err := pipeline.IndexErr(0)
	if err != nil {
		return false
	}
	name, _, ok := stageName(v)
	return ok && aggInitialSources[name]
}

// pipeline adds what pipeline, run against coll of p.db ("" for {aggregate: 1}), needs:
// find on the collection unless the pipeline starts with an initial source (only when
// implicitFind: $facet's sub-pipelines read their input, not a collection), then each
// stage's own privileges.
func (p *aggPrivs) pipeline(coll string, pipeline bsoncore.Array, implicitFind bool) {
	if implicitFind && !startsWithInitialSource(pipeline) {
		if coll == "" {
			// MongoDB's collectionless namespace "db.$cmd.aggregate", which no one may read:
			// a collectionless pipeline must start with an initial source.
			coll = "$cmd.aggregate"
		}
		p.add(auth.NS(p.db, coll), auth.Find)
	}
	vals, _ := pipeline.Values()
	for _, v := range vals {
		if name, spec, ok := stageName(v); ok {
			p.stage(coll, name, spec)
		}
	}
}

// here is the namespace resource a stage of a pipeline over coll reads.
func (p *aggPrivs) here(coll string) auth.Resource {
	if coll == "" || coll == "$cmd.aggregate" {
		return auth.DB(p.db)
	}
	return auth.NS(p.db, coll)
}

// stage adds one stage's requiredPrivileges.
func (p *aggPrivs) stage(coll, name string, spec bsoncore.Value) {
	d, _ := spec.DocumentOK()
	switch name {
	case "$collStats":
		p.add(p.here(coll), auth.CollStats)
	case "$indexStats":
		p.add(p.here(coll), auth.IndexStats)
	case "$planCacheStats":
		p.add(p.here(coll), auth.PlanCacheRead)
	case "$listSearchIndexes":
		p.add(p.here(coll), auth.ListSearchIndexes)
	case "$shardedDataDistribution":
		p.add(auth.Cluster(), auth.ShardedDataDistribution)
	case "$queryStats":
		p.add(auth.Cluster(), auth.QueryStatsRead)
	case "$listSampledQueries":
		p.add(auth.Cluster(), auth.ListSampledQueries)
	case "$listCachedAndActiveUsers":
		p.add(auth.Cluster(), auth.ListCachedAndActiveUsers)
	case "$listCatalog":
		if coll == "" {
			p.add(auth.Cluster(), auth.ListDatabases)
			p.add(auth.AnyResource(), auth.ListCollections)
		} else {
			p.add(auth.DB(p.db), auth.ListCollections)
		}
	case "$currentOp":
		// Without allUsers only the user's own operations are listed (the stage filters).
		if Truthy(d.Lookup("allUsers")) || (p.mongos && !Truthy(d.Lookup("localOps"))) {
			p.add(auth.Cluster(), auth.Inprog)
		}
	case "$listSessions", "$listLocalSessions":
		if !OwnSessionsOnly(p.user, d) {
			p.add(auth.Cluster(), auth.ListSessions)
		}
	case "$changeStream":
		switch {
		case Truthy(d.Lookup("allChangesForCluster")):
			p.add(auth.AnyNormal(), auth.Find, auth.ChangeStream)
		case coll == "":
			p.add(auth.DB(p.db), auth.Find, auth.ChangeStream)
		default:
			p.add(auth.NS(p.db, coll), auth.Find, auth.ChangeStream)
		}
	case "$out":
		if r, ok := nsResource(p.db, spec); ok {
			p.add(r, p.withBypass(auth.Insert, auth.Remove)...)
		}
	case "$merge":
		into := spec
		if d != nil {
			into = d.Lookup("into")
		}
		if r, ok := nsResource(p.db, into); ok {
			p.add(r, p.withBypass(mergeActions(d)...)...)
		}
	case "$lookup":
		from, hasFrom := nsResource(p.db, d.Lookup("from"))
		sub, hasSub := d.Lookup("pipeline").ArrayOK()
		if hasFrom && (!hasSub || !startsWithInitialSource(sub)) {
			p.add(from, auth.Find)
		}
		if hasSub {
			p.subPipeline(from, sub)
		}
	case "$graphLookup":
		if r, ok := nsResource(p.db, d.Lookup("from")); ok {
			p.add(r, auth.Find)
		}
	case "$unionWith":
		if coll, ok := spec.StringValueOK(); ok {
			p.add(auth.NS(p.db, coll), auth.Find)
			return
		}
		target, hasColl := nsResource(p.db, d.Lookup("coll"))
		sub, hasSub := d.Lookup("pipeline").ArrayOK()
		if hasColl && (!hasSub || !startsWithInitialSource(sub)) {
			p.add(target, auth.Find)
		}
		if hasSub {
			p.subPipeline(target, sub)
		}
	case "$facet":
		els, _ := d.Elements()
		for _, e := range els {
			if sub, ok := e.Value().ArrayOK(); ok {
				p.pipeline(coll, sub, false)
			}
		}
	}
}

// subPipeline adds the stage privileges of a $lookup or $unionWith pipeline over target
// (its implicit find is the caller's).
func (p *aggPrivs) subPipeline(target auth.Resource, sub bsoncore.Array) {
	inner := *p
	inner.out = nil
	coll := ""
	if target.Kind == auth.KindNS {
		inner.db, coll = target.DB, target.Coll
	}
	inner.pipeline(coll, sub, false)
	p.out = append(p.out, inner.out...)
}

func (p *aggPrivs) withBypass(acts ...auth.Action) []auth.Action {
	if p.bypass {
		acts = append(acts, auth.BypassDocumentValidation)
	}
	return acts
}

// mergeActions are what $merge's modes write on the target (DocumentSourceMerge's
// descriptors): insert when unmatched documents are inserted, update when matched ones are
// changed.
func mergeActions(spec bsoncore.Document) []auth.Action {
	matched, notMatched := "merge", "insert"
	if spec != nil {
		if s, ok := spec.Lookup("whenMatched").StringValueOK(); ok {
			matched = s
		} else if spec.Lookup("whenMatched").Type == bsoncore.TypeArray {
			matched = "pipeline"
		}
		if s, ok := spec.Lookup("whenNotMatched").StringValueOK(); ok {
			notMatched = s
		}
	}
	var acts []auth.Action
	if matched != "fail" {
		acts = append(acts, auth.Update)
	}
	if notMatched == "insert" {
		acts = append(acts, auth.Insert)
	}
	return acts
}

// OwnSessionsOnly reports whether a $listSessions or $listLocalSessions spec (or
// killAllSessions' user list) asks only for user's own sessions: neither allUsers nor
// another user in users (listSessionsRequiredPrivileges).
func OwnSessionsOnly(user *auth.UserName, spec bsoncore.Document) bool {
	if spec == nil {
		return true
	}
	if Truthy(spec.Lookup("allUsers")) {
		return false
	}
	arr, ok := spec.Lookup("users").ArrayOK()
	if !ok {
		return true
	}
	vals, _ := arr.Values()
	for _, v := range vals {
		d, _ := v.DocumentOK()
		u, _ := d.Lookup("user").StringValueOK()
		db, _ := d.Lookup("db").StringValueOK()
		if user == nil || *user != (auth.UserName{User: u, DB: db}) {
			return false
		}
	}
	return true
}

// AuthExplain is explain's check: the explained command's (ExplainCmd checks the inner
// invocation's authorization). A command explain does not know needs every privilege;
// the handler refuses it anyway.
func AuthExplain(mongos bool) AuthCheck {
	agg := AuthAggregate(mongos)
	return func(s *AuthSession, db string, cmd bsoncore.Document) error {
		inner, ok := firstValue(cmd).DocumentOK()
		if !ok {
			return allowed(s.Allowed(auth.AnyResource(), auth.AnyAction))
		}
		e, err := inner.IndexErr(0)
		if err != nil {
			return allowed(s.Allowed(auth.AnyResource(), auth.AnyAction))
		}
		switch e.Key() {
		case "find":
			return AuthFind(s, db, inner)
		case "count", "distinct":
			return allowed(s.Allowed(CommandNS(db, inner), auth.Find))
		case "aggregate":
			return agg(s, db, inner)
		case "update":
			return AuthUpdate(s, db, inner)
		case "delete":
			return AuthDelete(s, db, inner)
		case "findAndModify", "findandmodify":
			return AuthFindAndModify(s, db, inner)
		}
		return allowed(s.Allowed(auth.AnyResource(), auth.AnyAction))
	}
}

// AuthCreate is create's check (auth::checkAuthForCreate): createCollection or insert on
// the namespace (and convertToCapped for a capped collection); a view needs
// createCollection, and what its pipeline needs on viewOn.
func AuthCreate(mongos bool) AuthCheck {
	return func(s *AuthSession, db string, cmd bsoncore.Document) error {
		ns := CommandNS(db, cmd)
		if Truthy(cmd.Lookup("capped")) && !s.Allowed(ns, auth.ConvertToCapped) {
			return ErrNotAuthorized
		}
		canCreate := s.Allowed(ns, auth.CreateCollection)
		if viewOn := cmd.Lookup("viewOn"); viewOn.Type != 0 {
			if !canCreate {
				return ErrNotAuthorized
			}
			return authViewPipeline(s, db, ns, viewOn, cmd.Lookup("pipeline"), mongos)
		}
		return allowed(canCreate || s.Allowed(ns, auth.Insert))
	}
}

// authViewPipeline is checkAuthForCreateOrModifyView: a user who cannot read the view may
// define it as anything; one who can must hold what its pipeline needs on viewOn (else the
// view would read for them what they cannot).
func authViewPipeline(s *AuthSession, db string, view auth.Resource, viewOn, pipeline bsoncore.Value, mongos bool) error {
	if !s.Allowed(view, auth.Find) {
		return nil
	}
	on, _ := viewOn.StringValueOK()
	arr, _ := pipeline.ArrayOK()
	p := aggPrivs{db: db, mongos: mongos, user: s.User}
	p.pipeline(on, arr, true)
	return allowed(s.AllowedAll(p.out))
}

// AuthCollMod is collMod's check (auth::checkAuthForCollMod): collMod on the namespace; a
// view's new definition also as create's (viewOn and pipeline only together).
func AuthCollMod(mongos bool) AuthCheck {
	return func(s *AuthSession, db string, cmd bsoncore.Document) error {
		ns := CommandNS(db, cmd)
		if !s.Allowed(ns, auth.CollMod) {
			return ErrNotAuthorized
		}
		viewOn, pipeline := cmd.Lookup("viewOn"), cmd.Lookup("pipeline")
		if (viewOn.Type != 0) != (pipeline.Type != 0) {
			return mongoerr.New(mongoerr.InvalidOptions,
				"Must specify both 'viewOn' and 'pipeline' when modifying a view and auth is enabled")
		}
		if viewOn.Type != 0 {
			return authViewPipeline(s, db, ns, viewOn, pipeline, mongos)
		}
		return nil
	}
}

// AuthRenameCollection is renameCollection's check (rename_collection_common's
// checkAuthForRenameCollectionCommand). Within a database, renameCollectionSameDB on it
// (and dropCollection on the target with dropTarget) suffices when the user can read the
// source or cannot read the target (a rename must not expose what they cannot read);
// otherwise find and dropCollection on the source, insert and createIndex (and
// dropCollection) on the target.
func AuthRenameCollection(s *AuthSession, _ string, cmd bsoncore.Document) error {
	srcNS, _ := firstValue(cmd).StringValueOK()
	dstNS, _ := cmd.Lookup("to").StringValueOK()
	src, dst := auth.NSFromFull(srcNS), auth.NSFromFull(dstNS)
	if src.Kind != auth.KindNS || dst.Kind != auth.KindNS {
		// Not two namespaces: the handler refuses it; only a privilege on everything covers it.
		return allowed(s.Allowed(auth.AnyResource(), auth.AnyAction))
	}
	dropTarget := Truthy(cmd.Lookup("dropTarget"))
	if src.DB == dst.DB {
		canDrop := !dropTarget || s.Allowed(dst, auth.DropCollection)
		if s.Allowed(auth.DB(src.DB), auth.RenameCollectionSameDB) && canDrop &&
			(s.Allowed(src, auth.Find) || !s.Allowed(dst, auth.Find)) {
			return nil
		}
	}
	if !s.Allowed(src, auth.Find, auth.DropCollection) {
		return ErrNotAuthorized
	}
	acts := []auth.Action{auth.Insert, auth.CreateIndex}
	if dropTarget {
		acts = append(acts, auth.DropCollection)
	}
	return allowed(s.Allowed(dst, acts...))
}

// AuthListCollections is listCollections' check (checkAuthorizedToListCollections):
// listCollections on the database, or, for {authorizedCollections: true, nameOnly: true},
// any privilege in it (the handler then lists only the collections the user has a
// privilege on: ListCollectionVisible).
func AuthListCollections(s *AuthSession, db string, cmd bsoncore.Document) error {
	if Truthy(cmd.Lookup("authorizedCollections")) && Truthy(cmd.Lookup("nameOnly")) && s.AnyOn(auth.DB(db)) {
		return nil
	}
	return allowed(s.Allowed(auth.DB(db), auth.ListCollections))
}

// ListCollectionVisible reports whether listCollections lists db.coll to the session:
// always, unless the command asked for authorizedCollections, which lists only the
// collections the user holds some privilege on.
func ListCollectionVisible(s *AuthSession, cmd bsoncore.Document, db, coll string) bool {
	if !Truthy(cmd.Lookup("authorizedCollections")) {
		return true
	}
	return s.AnyOn(auth.NS(db, coll))
}

// ListDatabasesFilter is listDatabases' authorization (ListDatabasesCmd's typedRun):
// without listDatabases on the cluster a user sees only the databases it holds some
// privilege in (authorizedDatabases, the default then); asking for all of them
// (authorizedDatabases: false) without it is Unauthorized. visible reports whether a
// database is listed.
func ListDatabasesFilter(s *AuthSession, cmd bsoncore.Document) (visible func(db string) bool, err error) {
	all := s.Allowed(auth.Cluster(), auth.ListDatabases)
	onlyAuthorized := !all
	if v := cmd.Lookup("authorizedDatabases"); v.Type != 0 && v.Type != bsoncore.TypeNull {
		if !Truthy(v) && !all {
			return nil, mongoerr.New(mongoerr.Unauthorized, "Insufficient permissions to list all databases")
		}
		onlyAuthorized = Truthy(v)
	}
	if !onlyAuthorized {
		return func(string) bool { return true }, nil
	}
	return func(db string) bool { return s.AnyOn(auth.DB(db)) }, nil
}

// AuthCurrentOp is currentOp's check: inprog on the cluster, or {$ownOps: true} (the
// handler then lists only the user's own operations).
func AuthCurrentOp(s *AuthSession, _ string, cmd bsoncore.Document) error {
	if s.Allowed(auth.Cluster(), auth.Inprog) || Truthy(cmd.Lookup("$ownOps")) {
		return nil
	}
	return ErrNotAuthorized
}

// AuthKillAllSessionsByPattern: killAnySession on the cluster, and impersonate for a
// pattern naming users or roles.
func AuthKillAllSessionsByPattern(s *AuthSession, _ string, cmd bsoncore.Document) error {
	if !s.Allowed(auth.Cluster(), auth.KillAnySession) {
		return ErrNotAuthorized
	}
	if arr, ok := firstValue(cmd).ArrayOK(); ok {
		vals, _ := arr.Values()
		for _, v := range vals {
			d, _ := v.DocumentOK()
			if (d.Lookup("users").Type != 0 || d.Lookup("roles").Type != 0) &&
				!s.Allowed(auth.Cluster(), auth.Impersonate) {
				return ErrNotAuthorized
			}
		}
	}
	return nil
}

// NotAuthorized is the Unauthorized reply for cmd on db that dispatch sends when a check
// fails, for the handlers that finish a check themselves (killCursors).
func NotAuthorized(db string, cmd bsoncore.Document) error { return notAuthorized(db, cmd) }

// CheckGetMore is getMore's authorization of cursor c (pinned): the cursor's creator must
// be the session's user (isCoauthorizedWith), and the user must still hold what the
// command that opened it needed (its originating privileges: the registry's check of
// that command, run again).
func CheckGetMore(env *Env, id int64, c *cursor.Cursor) error {
	s := env.Auth
	if s == nil || !s.Enabled {
		return nil
	}
	if !s.IsCoauthorizedWith(c.Users) {
		return mongoerr.Newf(mongoerr.Unauthorized, "cursor id %d was not created by the authenticated user", id)
	}
	if env.Registry == nil || len(c.Command) == 0 {
		return nil
	}
	e, err := c.Command.IndexErr(0)
	if err != nil {
		return nil
	}
	origin := env.Registry.Lookup(e.Key())
	if origin == nil || origin.Auth == nil || s.Bypass {
		return nil
	}
	db, ok := c.Command.Lookup("$db").StringValueOK()
	if !ok {
		db = env.DB
	}
	if err := origin.Auth(s, db, c.Command); err != nil {
		return mongoerr.Newf(mongoerr.Unauthorized, "not authorized for getMore with cursor id %d", id)
	}
	return nil
}

// CheckKillCursors is killCursors' authorization (checkAuthForKillCursors): killAnyCursor on
// the cluster kills any cursor; otherwise each existing cursor of ids must be the user's,
// or the user needs killAnyCursor on the namespace (on the database for a listCollections
// cursor). Cursors not found are not an authorization
// matter. It fails with dispatch's Unauthorized reply for cmd.
func CheckKillCursors(env *Env, cmd bsoncore.Document, ns string, ids []int64) error {
	s := env.Auth
	if s == nil || !s.Enabled || s.Bypass || s.Allowed(auth.Cluster(), auth.KillAnyCursor) {
		return nil
	}
	m := env.State.Cursors()
	target := auth.NSFromFull(ns)
	if target.Kind == auth.KindNS && target.Coll == "$cmd.listCollections" {
		target = auth.DB(target.DB)
	}
	for _, id := range ids {
		c, ok := m.Get(id)
		if !ok || s.IsCoauthorizedWith(c.Users) {
			continue
		}
		if !s.Allowed(target, auth.KillAnyCursor) {
			return NotAuthorized(env.DB, cmd)
		}
	}
	return nil
}
