package event

import "strings"

// ScopeKind is what a stream watches.
type ScopeKind int

const (
	// ScopeCollection watches one collection (aggregate on a collection).
	ScopeCollection ScopeKind = iota
	// ScopeDatabase watches one database (aggregate: 1 on a database).
	ScopeDatabase
	// ScopeCluster watches every database but admin, config and local
	// (allChangesForCluster on admin).
	ScopeCluster
)

// Scope is what a stream watches: DB for collection and database streams, Coll for
// collection streams.
type Scope struct {
	Kind     ScopeKind
	DB, Coll string
}

// The predicates below are MongoDB's change stream regexes (DocumentSourceChangeStream's
// getNsRegexForChangeStream, getCollRegexForChangeStream, getCmdNsRegexForChangeStream,
// kRegexAllDBs and kRegexAllCollections[ShowSystemEvents], 7.0/8.0) written as code.

// collVisible is kRegexAllCollections: not `$...` nor `system.*`, except, with
// ShowSystemEvents, system.js, system.resharding.* and system.buckets.*.
func (o *Options) collVisible(coll string) bool {
	if strings.HasPrefix(coll, "$") {
		return false
	}
	rest, ok := strings.CutPrefix(coll, "system.")
	if !ok {
		return true
	}
	return o.ShowSystemEvents &&
		(rest == "js" || strings.HasPrefix(rest, "resharding.") || strings.HasPrefix(rest, "buckets."))
}

// clusterDB is kRegexAllDBs: any database but admin, config and local.
func clusterDB(db string) bool {
	return db != "" && db != "admin" && db != "config" && db != "local"
}

// nsMatches is the stream's namespace filter for a "db.coll" namespace (CRUD events and the
// two sides of a rename).
func (o *Options) nsMatches(ns string) bool {
	db, coll, ok := strings.Cut(ns, ".")
	if !ok {
		return false
	}
	switch o.Scope.Kind {
	case ScopeCollection:
		return db == o.Scope.DB && coll == o.Scope.Coll
	case ScopeDatabase:
		return db == o.Scope.DB && o.collVisible(coll)
	case ScopeCluster:
		return clusterDB(db) && o.collVisible(coll)
	}
	return false
}

// cmdDBMatches is the filter on a command entry's "<db>.$cmd" namespace.
func (o *Options) cmdDBMatches(db string) bool {
	switch o.Scope.Kind {
	case ScopeCollection, ScopeDatabase:
		return db == o.Scope.DB
	case ScopeCluster:
		return clusterDB(db)
	}
	return false
}

// collMatches is the filter on the collection a command names (o.drop, o.create, ...); the
// database was checked by cmdDBMatches.
func (o *Options) collMatches(coll string) bool {
	if o.Scope.Kind == ScopeCollection {
		return coll == o.Scope.Coll
	}
	return o.collVisible(coll)
}

// invalidatedBy reports whether an event of type opType ends the stream (MongoDB's
// isInvalidatingCommand): drop and rename for a collection stream (the filter only lets
// through those of its collection), dropDatabase for a database stream.
func (o *Options) invalidatedBy(opType string) bool {
	switch o.Scope.Kind {
	case ScopeCollection:
		return opType == OpDrop || opType == OpRename || opType == OpDropDatabase
	case ScopeDatabase:
		return opType == OpDropDatabase
	}
	return false
}

// classic lists the event types a stream without ShowExpandedEvents returns
// (change_stream_filter::getMatchFilterForClassicOperationTypes).
func classic(opType string) bool {
	switch opType {
	case OpInsert, OpUpdate, OpReplace, OpDelete, OpDrop, OpRename, OpDropDatabase, OpInvalidate:
		return true
	}
	return false
}
