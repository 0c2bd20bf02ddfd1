package ddl

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/client"
	"humongo/internal/mongoerr"
	"humongo/internal/sharding/configclient"
	"humongo/internal/sharding/shardregistry"
)

// RunFunc runs one command on this node, in-process (an error for ok: 0).
type RunFunc func(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error)

// Remote is a shard's connection to the rest of its cluster: the config server replica set
// (from the shard identity's configsvrConnectionString), the shard registry over it, and a
// client per other shard. Safe for concurrent use.
type Remote struct {
	opts    client.Options
	config  *client.ReplicaSet
	Catalog *configclient.Client
	Shards  *shardregistry.Registry

	mu     sync.Mutex
	conns  map[string]*client.ReplicaSet
	closed bool
}

// NewRemote connects (lazily) to the config servers named by connString ("set/host,...").
func NewRemote(connString string, o client.Options) (*Remote, error) {
	hosts, err := client.ParseReplicaSetHosts(connString)
	if err != nil {
		return nil, err
	}
	cfg, err := client.NewReplicaSet(hosts, o)
	if err != nil {
		return nil, err
	}
	cat := configclient.New(cfg.Client()).WithClock(o.Clock)
	reg := shardregistry.New(cat)
	if clock := o.Clock; clock != nil {
		// A removeShard or addShard gossiped to this shard makes its registry reload.
		reg.WithTopologyTime(func() bson.Timestamp {
			t := clock.Time().Topology
			return bson.Timestamp{T: t.Secs(), I: t.Inc()}
		})
	}
	return &Remote{opts: o, config: cfg, Catalog: cat, Shards: reg, conns: map[string]*client.ReplicaSet{}}, nil
}

// Config is the config server replica set's client.
func (r *Remote) Config() *client.ReplicaSet { return r.config }

// Shard returns a client for shard id.
func (r *Remote) Shard(ctx context.Context, id string) (*client.ReplicaSet, error) {
	s, err := r.Shards.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	hosts, err := client.ParseReplicaSetHosts(s.Host)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, mongoerr.New(mongoerr.ShutdownInProgress, "the server is shutting down")
	}
	if rs := r.conns[s.ID]; rs != nil && rs.Hosts().String() == hosts.String() {
		return rs, nil
	} else if rs != nil {
		go func() { _ = rs.Close(context.Background()) }()
	}
	rs, err := client.NewReplicaSet(hosts, r.opts)
	if err != nil {
		return nil, err
	}
	r.conns[s.ID] = rs
	return rs, nil
}

// Close disconnects from the shards and the config servers.
func (r *Remote) Close() {
	r.mu.Lock()
	conns := r.conns
	r.conns, r.closed = nil, true
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, rs := range conns {
		_ = rs.Close(ctx)
	}
	_ = r.config.Close(ctx)
}

// Run runs cmd on rs's primary and turns a remote error reply into the same mongoerr (code
// and message), so that it reaches the client unchanged.
func Run(ctx context.Context, rs *client.ReplicaSet, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
	raw, err := rs.RunCommand(ctx, db, bson.Raw(cmd), nil)
	if err != nil {
		return nil, RemoteError(err)
	}
	return bsoncore.Document(raw), nil
}

// RemoteError is err with a driver CommandError (a remote node's ok: 0) turned into a
// mongoerr carrying the remote code, message and reply; other errors are returned as they
// are (network errors keep their cause).
func RemoteError(err error) error {
	var ce mongo.CommandError
	// A network error (code 0, the NetworkError label) stays the driver's error: callers
	// retry it as one (mongo.IsNetworkError).
	if errors.As(err, &ce) && ce.Code != 0 && !ce.HasErrorLabel("NetworkError") {
		e := mongoerr.New(mongoerr.Code(ce.Code), ce.Message)
		e.Err = err
		if info := remoteInfo(bsoncore.Document(ce.Raw)); info != nil {
			e.Info = info
		}
		return e
	}
	return err
}

// remoteInfo keeps the extra fields of an error reply that a client may read (StaleConfig's
// ns/vReceived/vWanted/shardId, StaleDbVersion's db/vWanted...), not the generic ones.
func remoteInfo(reply bsoncore.Document) bsoncore.Document {
	elems, err := reply.Elements()
	if err != nil {
		return nil
	}
	b := bsoncore.NewDocumentBuilder()
	n := 0
	for _, e := range elems {
		switch e.Key() {
		case "ok", "errmsg", "code", "codeName", "$clusterTime", "operationTime", "$configTime", "$topologyTime",
			"errorLabels", "$configServerState", "$gleStats", "lastCommittedOpTime", "topologyVersion":
			continue
		}
		b.AppendValue(e.Key(), e.Value())
		n++
	}
	if n == 0 {
		return nil
	}
	return b.Build()
}
