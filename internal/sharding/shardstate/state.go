// Package shardstate owns a data node's sharded-cluster role and its in-memory sharding
// state (spec: /work/shared/spec/sharding.md, "Shard awareness" and "The shard registry";
// MongoDB's ShardingState and ShardingInitializationMongoD): whether the node runs as a
// config server (--configsvr) or a shard (--shardsvr), and, for a shard, the identity it
// learns from the shardIdentity document in admin.system.version — its shard name, the
// cluster id and the config server's connection string. A shard is shard-aware only once it
// has that identity; a config server is from the moment its catalog is initialised (its
// cluster id comes from config.version). The package also validates the identity document
// as MongoDB does and renders serverStatus's `sharding` section.
package shardstate

import (
	"fmt"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// Role is a data node's sharded-cluster role (mongod's ClusterRole).
type Role int

const (
	// RoleNone: not part of a sharded cluster.
	RoleNone Role = iota
	// RoleConfigServer: --configsvr / sharding.clusterRole: configsvr.
	RoleConfigServer
	// RoleShardServer: --shardsvr / sharding.clusterRole: shardsvr.
	RoleShardServer
)

// ParseRole maps sharding.clusterRole's value ("", "configsvr", "shardsvr") to a Role.
func ParseRole(s string) (Role, error) {
	switch s {
	case "":
		return RoleNone, nil
	case "configsvr":
		return RoleConfigServer, nil
	case "shardsvr":
		return RoleShardServer, nil
	}
	return RoleNone, mongoerr.Newf(mongoerr.BadValue, "Bad value for sharding.clusterRole: %s.  Supported modes are: (configsvr|shardsvr)", s)
}

// ConfigServerShardID is the shard id a config server uses for itself (ShardId::kConfigServerId).
const ConfigServerShardID = "config"

// DefaultMaxChunkSizeBytes is the balancer's default chunk size, 128 MB in MongoDB 7.0
// (ChunkSizeSettingsType::kDefaultMaxChunkSizeBytes), until config.settings says otherwise.
const DefaultMaxChunkSizeBytes = 128 << 20

// Identity is what a shard knows about its cluster (ShardIdentityType).
type Identity struct {
	ShardName                 string
	ClusterID                 bson.ObjectID
	ConfigsvrConnectionString string
}

// Document returns the shardIdentity document of id, as admin.system.version stores it.
func (id Identity) Document() bsoncore.Document {
	return bsoncore.NewDocumentBuilder().
		AppendString("_id", IdentityID).
		AppendString("shardName", id.ShardName).
		AppendObjectID("clusterId", id.ClusterID).
		AppendString("configsvrConnectionString", id.ConfigsvrConnectionString).Build()
}

// IdentityNS and IdentityID locate the shardIdentity document.
const (
	IdentityNS = "admin.system.version"
	IdentityID = "shardIdentity"
)

// IsIdentityDoc reports whether doc is the shardIdentity document (_id "shardIdentity").
func IsIdentityDoc(doc bsoncore.Document) bool {
	s, ok := doc.Lookup("_id").StringValueOK()
	return ok && s == IdentityID
}

// ParseIdentity decodes and validates a shardIdentity document as MongoDB's
// ShardIdentityType::fromShardIdentityDocument and validate do: the IDL struct ShardIdentity
// (shardName: string, clusterId: objectid, configsvrConnectionString: a connection string;
// all required), and a config server connection string that names a replica set.
func ParseIdentity(doc bsoncore.Document) (Identity, error) {
	var id Identity
	if doc.Lookup("_id").Type == 0 {
		return id, mongoerr.New(mongoerr.NoSuchKey, "missing _id field for shardIdentity document")
	}
	elems, err := doc.Elements()
	if err != nil {
		return id, mongoerr.Newf(mongoerr.InvalidBSON, "invalid shardIdentity document: %v", err)
	}
	wrongType := func(field string, t bsoncore.Type, want string) error {
		return mongoerr.Newf(mongoerr.TypeMismatch, "BSON field 'ShardIdentity.%s' is the wrong type '%s', expected type '%s'",
			field, bsonutil.TypeName(t), want)
	}
	var haveName, haveCluster, haveConn bool
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "shardName":
			s, ok := v.StringValueOK()
			if !ok {
				return id, wrongType("shardName", v.Type, "string")
			}
			id.ShardName, haveName = s, true
		case "clusterId":
			oid, ok := v.ObjectIDOK()
			if !ok {
				return id, wrongType("clusterId", v.Type, "objectId")
			}
			id.ClusterID, haveCluster = oid, true
		case "configsvrConnectionString":
			s, ok := v.StringValueOK()
			if !ok {
				return id, wrongType("configsvrConnectionString", v.Type, "string")
			}
			if err := checkConnectionString(s); err != nil {
				return id, err
			}
			id.ConfigsvrConnectionString, haveConn = s, true
		}
	}
	for _, f := range []struct {
		name string
		ok   bool
	}{{"shardName", haveName}, {"clusterId", haveCluster}, {"configsvrConnectionString", haveConn}} {
		if !f.ok {
			return id, mongoerr.Newf(mongoerr.Location40414, "BSON field 'ShardIdentity.%s' is missing but a required field", f.name)
		}
	}
	return id, nil
}

// checkConnectionString checks a config server connection string: ConnectionString::parse
// (a comma list without a set name is FailedToParse "invalid url"), then the replica-set
// requirement (UnsupportedFormat).
func checkConnectionString(s string) error {
	i := strings.Index(s, "/")
	if i <= 0 {
		if strings.Contains(s, ",") {
			return mongoerr.Newf(mongoerr.FailedToParse, "invalid url [%s]", s)
		}
		if s == "" {
			return mongoerr.Newf(mongoerr.FailedToParse, "Empty host component parsing HostAndPort from %q", s)
		}
		return mongoerr.Newf(mongoerr.UnsupportedFormat, "config server connection string can only be replica sets: %s", s)
	}
	for _, h := range strings.Split(s[i+1:], ",") {
		if h == "" {
			return mongoerr.Newf(mongoerr.FailedToParse, "Empty host component parsing HostAndPort from %q", h)
		}
	}
	return nil
}

// State is a data node's sharding state. Its methods are safe for concurrent use.
type State struct {
	role Role

	mu           sync.Mutex
	aware        bool // ShardingState::enabled()
	id           Identity
	maxChunkSize int64
}

// New returns the state of a node of role, not yet shard-aware.
func New(role Role) *State {
	return &State{role: role, maxChunkSize: DefaultMaxChunkSizeBytes}
}

// Role is the node's cluster role; a nil State is RoleNone.
func (s *State) Role() Role {
	if s == nil {
		return RoleNone
	}
	return s.role
}

// Initialize makes the node shard-aware with id (ShardingInitializationMongoD's
// initializeFromShardIdentity). Initialising again with the same identity does nothing; a
// different shard name or cluster id is InconsistentShardIdentity, as one node belongs to
// one cluster for its lifetime.
func (s *State) Initialize(id Identity) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aware {
		if s.id.ShardName != id.ShardName || s.id.ClusterID != id.ClusterID {
			return mongoerr.Newf(mongoerr.InconsistentShardIdentity,
				"shard identity %s does not match the one already in use, %s", describe(id), describe(s.id))
		}
		s.id.ConfigsvrConnectionString = id.ConfigsvrConnectionString
		return nil
	}
	s.aware, s.id = true, id
	return nil
}

func describe(id Identity) string {
	return fmt.Sprintf("{shardName: %q, clusterId: %s}", id.ShardName, id.ClusterID.Hex())
}

// Identity returns the node's identity and whether it is shard-aware.
func (s *State) Identity() (Identity, bool) {
	if s == nil {
		return Identity{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id, s.aware
}

// AppendServerStatus appends serverStatus's `sharding` section as mongod 7.0 reports it
// (ShardingServerStatus): only on a shard-aware node of either role. The config time and
// topology time come from the vector clock, which does not gossip yet: they show as the
// uninitialised optime {ts: Timestamp(0, 0), t: -1}, as in MongoDB before any is seen.
func (s *State) AppendServerStatus(b []byte) []byte {
	if s == nil || s.role == RoleNone {
		return b
	}
	id, aware := s.Identity()
	if !aware {
		return b
	}
	s.mu.Lock()
	maxChunk := s.maxChunkSize
	s.mu.Unlock()
	unset := bsoncore.NewDocumentBuilder().AppendTimestamp("ts", 0, 0).AppendInt64("t", -1).Build()
	return bsoncore.AppendDocumentElement(b, "sharding", bsoncore.NewDocumentBuilder().
		AppendString("configsvrConnectionString", id.ConfigsvrConnectionString).
		AppendDocument("lastSeenConfigServerOpTime", unset).
		AppendDocument("lastSeenTopologyOpTime", unset).
		AppendInt64("maxChunkSizeInBytes", maxChunk).Build())
}
