package configsvr

// addShard on the config server (spec: sharding.md "The config server", "Adding a shard";
// MongoDB 7.0's ShardingCatalogManager::addShard, _checkIfShardExists, _validateHostAsShard,
// _getDBNamesListFromShard and _addShardInTransaction): validate the candidate replica set
// through its primary, make it shard-aware with _addShard (its shardIdentity document), and
// record it in config.shards together with the databases it already holds.
//
// Not done here, as MongoDB does: dropping the candidate's own config.system.sessions
// (humongod refuses to drop that system collection, and its shards still keep their sessions
// locally until the sessions collection is sharded), setFeatureCompatibilityVersion, cluster parameters and
// user-write blocking pushed to the new shard (humongo has none of them yet), the changelog
// entry, and writing config.shards and config.databases in one transaction: they are written
// one after the other, config.shards first, so that a failure in between leaves a shard whose
// repeated addShard answers at once (MongoDB's idempotent path) with some of its databases
// not imported; the databases are then created again on first use by the router.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/client"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/catalogcache"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardregistry"
	"humongo/internal/sharding/shardstate"
)

// Manager is the config server primary's writer of the sharding catalog (MongoDB's
// ShardingCatalogManager). One per config server node; safe for concurrent use.
type Manager struct {
	// Run runs a command on this node (reads of the catalog at local read concern, writes
	// with the write concern the command carries).
	Run RunFunc
	// Client configures the connections to shards (the node's host rewriter).
	Client client.Options
	// ConnectionString is this config server replica set's "set/host,..." (what shards are
	// told in their shardIdentity).
	ConnectionString func() string
	// Now is the vector clock's time for a new topologyTime or database version timestamp
	// (MongoDB ticks the cluster time).
	Now func() bson.Timestamp
	// TopologyChanged, when set, is told the topologyTime of a shard added to config.shards
	// once the entry is majority committed (the vector clock's TopologyTime ticks to it).
	TopologyChanged func(bson.Timestamp)

	// membership serialises addShard (MongoDB's _kShardMembershipLock).
	membership sync.Mutex
	// dbCreate serialises the expensive path of createDatabase (MongoDB's DDL lock per
	// database; one lock for all is enough for a path taken once per database).
	dbCreate sync.Mutex
	// zones serialises the zone commands (MongoDB's _kZoneOpLock; zones.go).
	zones sync.Mutex
}

// AddShardRequest is AddShardRequest of MongoDB: the connection string and the optional name.
type AddShardRequest struct {
	ConnString string
	Name       *string
}

// connString is a parsed MongoDB ConnectionString: a replica set ("set/h1,h2") or a single
// standalone host.
type connString struct {
	set   string
	hosts []string
}

func (c connString) String() string {
	if c.set == "" {
		return strings.Join(c.hosts, ",")
	}
	return c.set + "/" + strings.Join(c.hosts, ",")
}

// parseConnString is ConnectionString::parse as addShard uses it: "set/host,..." or one
// host; a list of hosts without a set name is FailedToParse "invalid url".
func parseConnString(s string) (connString, error) {
	var c connString
	list := s
	if i := strings.Index(s, "/"); i >= 0 {
		c.set, list = s[:i], s[i+1:]
		if c.set == "" {
			return c, mongoerr.Newf(mongoerr.FailedToParse, "invalid url [%s]", s)
		}
	} else if strings.Contains(s, ",") {
		return c, mongoerr.Newf(mongoerr.FailedToParse, "invalid url [%s]", s)
	}
	for _, h := range strings.Split(list, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			return c, mongoerr.Newf(mongoerr.FailedToParse, "Empty host component parsing HostAndPort from %q", h)
		}
		if err := client.ValidateHost(h); err != nil {
			return c, mongoerr.Newf(mongoerr.FailedToParse, "%v", err)
		}
		c.hosts = append(c.hosts, h)
	}
	return c, nil
}

// ParseAddShard reads addShard's arguments: the connection string in field (the command
// name's value) and name. A missing or empty name means "default"; an empty given name is
// BadValue as in MongoDB.
func ParseAddShard(cmd bsoncore.Document) (AddShardRequest, error) {
	var r AddShardRequest
	first, err := cmd.IndexErr(0)
	if err != nil {
		return r, mongoerr.New(mongoerr.FailedToParse, "addShard: empty command")
	}
	s, ok := first.Value().StringValueOK()
	if !ok {
		return r, mongoerr.Newf(mongoerr.TypeMismatch, "'%s' must be of type string", first.Key())
	}
	if s == "" {
		return r, mongoerr.New(mongoerr.BadValue, "Invalid connection string")
	}
	r.ConnString = s
	if v, err := cmd.LookupErr("name"); err == nil {
		name, ok := v.StringValueOK()
		if !ok {
			return r, mongoerr.New(mongoerr.TypeMismatch, "'name' must be of type string")
		}
		if name == "" {
			return r, mongoerr.New(mongoerr.BadValue, "shard name cannot be empty")
		}
		r.Name = &name
	}
	return r, nil
}

// candidate is a connection to the shard being added: to its primary for a replica set, to
// the host itself for a standalone.
type candidate struct {
	cs     connString
	rs     *client.ReplicaSet
	direct *mongo.Client
}

func (m *Manager) dial(cs connString) (*candidate, error) {
	c := &candidate{cs: cs}
	var err error
	if cs.set == "" {
		c.direct, err = client.Connect(cs.hosts[0], m.Client)
	} else {
		c.rs, err = client.NewReplicaSet(client.ReplicaSetHosts{SetName: cs.set, Seeds: cs.hosts}, m.Client)
	}
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.OperationFailed, "could not connect to %s: %v", cs, err)
	}
	return c, nil
}

func (c *candidate) close(ctx context.Context) {
	if c.rs != nil {
		_ = c.rs.Close(ctx)
	}
	if c.direct != nil {
		_ = c.direct.Disconnect(ctx)
	}
}

// run is _runCommandForAddShard: the command on the candidate's primary; a failure to reach
// it (or a retriable error) becomes OperationFailed naming the command, any other error of
// the remote command is propagated with its code.
func (c *candidate) run(ctx context.Context, db string, cmd bson.D) (bsoncore.Document, error) {
	var raw bson.Raw
	var err error
	if c.rs != nil {
		raw, err = c.rs.RunCommand(ctx, db, cmd, readpref.Primary())
	} else {
		raw, err = c.direct.Database(db).RunCommand(ctx, cmd).Raw()
	}
	if err == nil {
		return bsoncore.Document(raw), nil
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) && !mongoerr.IsRetriableError(mongoerr.Code(ce.Code)) {
		return nil, mongoerr.New(mongoerr.Code(ce.Code), ce.Message)
	}
	text, _ := bson.MarshalExtJSON(cmd, false, false)
	return nil, mongoerr.Newf(mongoerr.OperationFailed, "failed to run command %s when attempting to add shard %s :: caused by :: %v",
		text, c.cs, err)
}

// helloDirect asks the first seed that answers for its hello, without choosing a primary:
// it tells the candidate's actual set name before a replica-set client would wait for a
// set of that name in vain.
func (m *Manager) helloDirect(ctx context.Context, cs connString) (bsoncore.Document, error) {
	var last error
	for _, h := range cs.hosts {
		cl, err := client.Connect(h, m.Client)
		if err != nil {
			last = err
			continue
		}
		raw, err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "isMaster", Value: 1}}).Raw()
		_ = cl.Disconnect(context.WithoutCancel(ctx))
		if err == nil {
			return bsoncore.Document(raw), nil
		}
		last = err
	}
	return nil, mongoerr.Newf(mongoerr.OperationFailed, "failed to run command { isMaster: 1 } when attempting to add shard %s :: caused by :: %v", cs, last)
}

// AddShard adds the shard and returns its name (MongoDB's ShardingCatalogManager::addShard).
// A shard already added with the same options answers its existing name.
func (m *Manager) AddShard(ctx context.Context, req AddShardRequest) (string, error) {
	cs, err := parseConnString(req.ConnString)
	if err != nil {
		return "", err
	}
	m.membership.Lock()
	defer m.membership.Unlock()

	existing, err := m.shards(ctx)
	if err != nil {
		return "", fmt.Errorf("Failed to load existing shards during addShard: %w", err)
	}
	if s, err := checkIfShardExists(existing, cs, req.Name); err != nil || s != nil {
		if s != nil {
			return s.ID, nil
		}
		return "", err
	}

	// The candidate's set name as it reports it, checked before a replica-set client is
	// built for it (a mismatch would only show as a server selection timeout).
	first, err := m.helloDirect(ctx, cs)
	if err != nil {
		return "", err
	}
	if err := checkSetName(cs, first); err != nil {
		return "", err
	}
	cand, err := m.dial(cs)
	if err != nil {
		return "", err
	}
	defer cand.close(context.WithoutCancel(ctx))

	shard, err := m.validateHostAsShard(ctx, cand, req.Name)
	if err != nil {
		return "", err
	}
	dbNames, err := dbNamesOnShard(ctx, cand)
	if err != nil {
		return "", err
	}
	for _, db := range dbNames {
		d, found, err := m.findDatabase(ctx, bsoncore.NewDocumentBuilder().AppendString("_id", db).Build())
		if err != nil {
			return "", err
		}
		if found {
			return "", mongoerr.Newf(mongoerr.OperationFailed, "can't add shard '%s' because a local database '%s' exists in another %s",
				cs, db, d.Primary)
		}
	}
	clusterID, ok, err := ReadClusterID(ctx, m.Run)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", mongoerr.New(mongoerr.NotYetInitialized, "the config server's catalog is not initialized yet")
	}
	id := shardstate.Identity{ShardName: shard.ID, ClusterID: clusterID, ConfigsvrConnectionString: m.ConnectionString()}
	idDoc, err := bson.Raw(id.Document()).Elements()
	if err != nil {
		return "", err
	}
	var identity bson.D
	for _, e := range idDoc {
		if e.Key() == "_id" {
			continue
		}
		var v any
		if err := e.Value().Unmarshal(&v); err != nil {
			return "", err
		}
		identity = append(identity, bson.E{Key: e.Key(), Value: v})
	}
	if _, err := cand.run(ctx, "admin", bson.D{{Key: "_addShard", Value: 1}, {Key: "shardIdentity", Value: identity},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}}); err != nil {
		return "", err
	}

	shard.TopologyTime = m.Now()
	if err := m.insert(ctx, "shards", shard.Doc()); err != nil {
		return "", err
	}
	if m.TopologyChanged != nil {
		m.TopologyChanged(shard.TopologyTime)
	}
	var dbDocs, placement []bsoncore.Document
	for _, db := range dbNames {
		dbDocs = append(dbDocs, configclient.DatabaseDoc(catalogcache.Database{Name: db, Primary: shard.ID,
			Version: routing.NewDatabaseVersion(catalog.NewUUID(), shard.TopologyTime)}))
		placement = append(placement, placementDoc(db, shard.TopologyTime, shard.ID))
	}
	if err := m.insert(ctx, "databases", dbDocs...); err != nil {
		return "", err
	}
	if err := m.insert(ctx, "placementHistory", placement...); err != nil {
		return "", err
	}
	return shard.ID, nil
}

// placementDoc is a config.placementHistory entry (NamespacePlacementType).
func placementDoc(nss string, ts bson.Timestamp, shards ...string) bsoncore.Document {
	ab := bsoncore.NewArrayBuilder()
	for _, s := range shards {
		ab.AppendString(s)
	}
	return bsoncore.NewDocumentBuilder().AppendString("nss", nss).AppendTimestamp("timestamp", ts.T, ts.I).
		AppendArray("shards", ab.Build()).Build()
}

// checkIfShardExists is _checkIfShardExists: an existing shard with the candidate's set
// name or one of its hosts is the same shard (returned: addShard is a no-op) when the options
// match, else IllegalOperation; a different shard of the proposed name is IllegalOperation.
func checkIfShardExists(existing []shardregistry.Shard, cs connString, name *string) (*shardregistry.Shard, error) {
	for i := range existing {
		ex := &existing[i]
		exCS, err := parseConnString(ex.Host)
		if err != nil {
			return nil, err
		}
		equivalent := func() bool {
			if name != nil && *name != ex.ID {
				return false
			}
			if (cs.set == "") != (exCS.set == "") {
				return false
			}
			return cs.set == exCS.set
		}
		overlap := ""
		for _, h := range exCS.hosts {
			if slices.Contains(cs.hosts, h) {
				overlap = h
				break
			}
		}
		if exCS.set != "" && cs.set != "" && exCS.set == cs.set {
			if !equivalent() {
				return nil, mongoerr.Newf(mongoerr.IllegalOperation, "A shard already exists containing the replica set '%s'", exCS.set)
			}
			if overlap != "" {
				return ex, nil
			}
			return nil, mongoerr.Newf(mongoerr.IllegalOperation, "A shard named %s containing the replica set '%s' already exists",
				exCS.set, exCS.set)
		}
		if overlap != "" {
			if equivalent() {
				return ex, nil
			}
			return nil, mongoerr.Newf(mongoerr.IllegalOperation, "'%s' is already a member of the existing shard '%s' (%s).",
				overlap, ex.Host, ex.ID)
		}
		if name != nil && *name == ex.ID {
			return nil, mongoerr.Newf(mongoerr.IllegalOperation, "A shard named %s already exists", *name)
		}
	}
	return nil, nil
}

// checkSetName is the set-name part of _validateHostAsShard.
func checkSetName(cs connString, hello bsoncore.Document) error {
	if msg, _ := hello.Lookup("msg").StringValueOK(); msg == "isdbgrid" {
		return mongoerr.New(mongoerr.IllegalOperation, "cannot add a mongos as a shard")
	}
	found, _ := hello.Lookup("setName").StringValueOK()
	switch {
	case cs.set == "" && found != "":
		return mongoerr.Newf(mongoerr.OperationFailed, "host is part of set %s; use replica set url format <setname>/<server1>,<server2>, ...", found)
	case cs.set != "" && found == "":
		return mongoerr.Newf(mongoerr.OperationFailed, "host did not return a set name; is the replica set still initializing? %s", hello)
	case cs.set != found:
		return mongoerr.Newf(mongoerr.OperationFailed, "the provided connection string (%s) does not match the actual set name %s", cs, found)
	}
	return nil
}

// validateHostAsShard is _validateHostAsShard on the candidate's primary: not a mongos, a
// primary, of the named set, not a config server, every listed host a member. It returns
// the shard's entry: the given name or the set name, the set's current connection string,
// state 1 (shard-aware).
func (m *Manager) validateHostAsShard(ctx context.Context, cand *candidate, name *string) (shardregistry.Shard, error) {
	cs := cand.cs
	hello, err := cand.run(ctx, "admin", bson.D{{Key: "isMaster", Value: 1}})
	if err != nil {
		return shardregistry.Shard{}, err
	}
	if msg, _ := hello.Lookup("msg").StringValueOK(); msg == "isdbgrid" {
		return shardregistry.Shard{}, mongoerr.New(mongoerr.IllegalOperation, "cannot add a mongos as a shard")
	}
	if _, ok := hello.Lookup("maxWireVersion").AsInt64OK(); !ok {
		return shardregistry.Shard{}, mongoerr.Newf(mongoerr.NoSuchKey, "isMaster returned invalid 'maxWireVersion' field when attempting to add %s as a shard", cs)
	}
	if primary, _ := hello.Lookup("ismaster").BooleanOK(); !primary {
		return shardregistry.Shard{}, mongoerr.Newf(mongoerr.NotWritablePrimary,
			"%s does not have a master. If this is a replica set, ensure that it has a healthy primary and that the set has been properly initiated.", cs)
	}
	if err := checkSetName(cs, hello); err != nil {
		return shardregistry.Shard{}, err
	}
	if hello.Lookup("configsvr").Type != 0 {
		return shardregistry.Shard{}, mongoerr.Newf(mongoerr.OperationFailed, "Cannot add %s as a shard since it is a config server", cs)
	}
	var members []string
	if cs.set != "" {
		for _, f := range []string{"hosts", "passives", "arbiters"} {
			arr, _ := hello.Lookup(f).ArrayOK()
			vals, _ := arr.Values()
			for _, v := range vals {
				if h, ok := v.StringValueOK(); ok {
					members = append(members, h)
				}
			}
		}
		for _, h := range cs.hosts {
			if !slices.Contains(members, h) {
				return shardregistry.Shard{}, mongoerr.Newf(mongoerr.OperationFailed, "in seed list %s, host %s does not belong to replica set %s; found %s",
					cs, h, cs.set, hello)
			}
		}
	}
	s := shardregistry.Shard{State: 1}
	switch {
	case name != nil:
		s.ID = *name
	case cs.set != "":
		s.ID = cs.set
	}
	if s.ID == shardstate.ConfigServerShardID {
		return shardregistry.Shard{}, mongoerr.New(mongoerr.BadValue, "use of shard replica set with name 'config' is not allowed")
	}
	if s.ID == "" {
		// A standalone without a name: MongoDB generates "shardNNNN"; standalones cannot
		// be shards here (_addShard refuses a node without --shardsvr, and --shardsvr needs
		// --replSet), so this only names the error's subject.
		s.ID = cs.String()
	}
	// The set's current connection string: every member it reports (MongoDB takes the
	// replica set monitor's), the seeds for a standalone.
	s.Host = cs.String()
	if cs.set != "" {
		hosts, _ := hello.Lookup("hosts").ArrayOK()
		vals, _ := hosts.Values()
		var hs []string
		for _, v := range vals {
			if h, ok := v.StringValueOK(); ok {
				hs = append(hs, h)
			}
		}
		if len(hs) > 0 {
			s.Host = cs.set + "/" + strings.Join(hs, ",")
		}
	}
	return s, nil
}

// dbNamesOnShard is _getDBNamesListFromShard: the candidate's databases but admin, config
// and local.
func dbNamesOnShard(ctx context.Context, cand *candidate) ([]string, error) {
	reply, err := cand.run(ctx, "admin", bson.D{{Key: "listDatabases", Value: 1}, {Key: "nameOnly", Value: true}})
	if err != nil {
		return nil, err
	}
	arr, _ := reply.Lookup("databases").ArrayOK()
	vals, _ := arr.Values()
	var out []string
	for _, v := range vals {
		d, _ := v.DocumentOK()
		name, _ := d.Lookup("name").StringValueOK()
		if name == "" || name == "admin" || name == "local" || name == "config" {
			continue
		}
		out = append(out, name)
	}
	return out, nil
}

// shards reads config.shards locally.
func (m *Manager) shards(ctx context.Context) ([]shardregistry.Shard, error) {
	docs, err := m.find(ctx, "shards", bsoncore.NewDocumentBuilder().Build(), 0)
	if err != nil {
		return nil, err
	}
	out := make([]shardregistry.Shard, 0, len(docs))
	for _, d := range docs {
		s, err := shardregistry.ParseShard(d)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// findDatabase reads the first config.databases entry matching filter.
func (m *Manager) findDatabase(ctx context.Context, filter bsoncore.Document) (catalogcache.Database, bool, error) {
	docs, err := m.find(ctx, "databases", filter, 1)
	if err != nil || len(docs) == 0 {
		return catalogcache.Database{}, false, err
	}
	d, err := configclient.ParseDatabase(docs[0])
	return d, err == nil, err
}

// find runs a find on config.<coll> on this node (all of the result: the catalog
// collections it reads are small).
func (m *Manager) find(ctx context.Context, coll string, filter bsoncore.Document, limit int32) ([]bsoncore.Document, error) {
	b := bsoncore.NewDocumentBuilder().AppendString("find", coll).AppendDocument("filter", filter)
	if limit > 0 {
		b.AppendInt32("limit", limit)
	}
	reply, err := m.Run(ctx, "config", b.AppendBoolean("singleBatch", true).AppendInt32("batchSize", 1<<20).Build())
	if err != nil {
		return nil, fmt.Errorf("read config.%s: %w", coll, err)
	}
	arr, _ := reply.Lookup("cursor", "firstBatch").ArrayOK()
	vals, _ := arr.Values()
	out := make([]bsoncore.Document, 0, len(vals))
	for _, v := range vals {
		if d, ok := v.DocumentOK(); ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// insert inserts docs into config.<coll> with majority write concern; a write error or a
// write concern error fails it.
func (m *Manager) insert(ctx context.Context, coll string, docs ...bsoncore.Document) error {
	if len(docs) == 0 {
		return nil
	}
	ab := bsoncore.NewArrayBuilder()
	for _, d := range docs {
		ab.AppendDocument(d)
	}
	cmd := bsoncore.NewDocumentBuilder().AppendString("insert", coll).AppendArray("documents", ab.Build()).
		AppendDocument("writeConcern", majority()).Build()
	reply, err := m.Run(ctx, "config", cmd)
	if err != nil {
		return fmt.Errorf("write config.%s: %w", coll, err)
	}
	return WriteReplyError(reply)
}

func majority() bsoncore.Document {
	return bsoncore.NewDocumentBuilder().AppendString("w", "majority").Build()
}

// WriteReplyError is the first write error or the write concern error of a write command's
// reply, as a mongoerr (nil when there is none).
func WriteReplyError(reply bsoncore.Document) error {
	if we, ok := reply.Lookup("writeErrors").ArrayOK(); ok {
		vals, _ := we.Values()
		for _, v := range vals {
			d, _ := v.DocumentOK()
			code, _ := d.Lookup("code").AsInt64OK()
			msg, _ := d.Lookup("errmsg").StringValueOK()
			return mongoerr.New(mongoerr.Code(code), msg)
		}
	}
	if wce, ok := reply.Lookup("writeConcernError").DocumentOK(); ok {
		code, _ := wce.Lookup("code").AsInt64OK()
		msg, _ := wce.Lookup("errmsg").StringValueOK()
		return mongoerr.New(mongoerr.Code(code), msg)
	}
	return nil
}
