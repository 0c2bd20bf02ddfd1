package client

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"humongo/internal/mongoerr"
)

// ReplicaSetHosts is a replica set's name and seed list, MongoDB's "setName/host1,host2" form
// (a shard's host string in config.shards, mongos --configdb).
type ReplicaSetHosts struct {
	SetName string
	Seeds   []string
}

// ParseReplicaSetHosts parses "setName/host:port,host:port". Every seed must be a host:port
// address; otherwise, or without a set name or seeds, the error is FailedToParse.
func ParseReplicaSetHosts(s string) (ReplicaSetHosts, error) {
	name, list, ok := strings.Cut(s, "/")
	if !ok || name == "" || list == "" {
		return ReplicaSetHosts{}, mongoerr.Newf(mongoerr.FailedToParse, "%q is not of the form setName/host:port[,host:port...]", s)
	}
	h := ReplicaSetHosts{SetName: name}
	for _, seed := range strings.Split(list, ",") {
		if err := ValidateHost(seed); err != nil {
			return ReplicaSetHosts{}, mongoerr.Newf(mongoerr.FailedToParse, "replica set %s: %v", name, err)
		}
		h.Seeds = append(h.Seeds, seed)
	}
	return h, nil
}

// String is the "setName/host,host" form.
func (h ReplicaSetHosts) String() string { return h.SetName + "/" + strings.Join(h.Seeds, ",") }

// ReplicaSet is a client for one replica set: the driver discovers the members from the
// seeds, follows elections (SDAM, MongoDB's ReplicaSetMonitor) and, for each command, selects
// a member by the read preference it is given.
type ReplicaSet struct {
	hosts ReplicaSetHosts
	opts  Options
	cl    *mongo.Client
}

// NewReplicaSet returns a client for the replica set h, dialing through o.Dialer. Like
// mongo.Connect it does not wait for any member: the first command does.
func NewReplicaSet(h ReplicaSetHosts, o Options) (*ReplicaSet, error) {
	if h.SetName == "" || len(h.Seeds) == 0 {
		return nil, mongoerr.Newf(mongoerr.BadValue, "a replica set client needs a set name and seeds, got %q", h.String())
	}
	uri := "mongodb://" + strings.Join(h.Seeds, ",") + "/?replicaSet=" + url.QueryEscape(h.SetName)
	cl, err := mongo.Connect(o.driverOptions(uri))
	if err != nil {
		return nil, fmt.Errorf("connect to replica set %s: %w", h.String(), err)
	}
	return &ReplicaSet{hosts: h, opts: o, cl: cl}, nil
}

// Hosts is the set name and seed list the client was built with.
func (r *ReplicaSet) Hosts() ReplicaSetHosts { return r.hosts }

// RunCommand runs cmd against db on a member chosen by rp (nil: primary) and returns the
// reply; ctx bounds both the choice and the command. A reply with ok: 0 is an error
// (mongo.CommandError, which keeps the remote code).
func (r *ReplicaSet) RunCommand(ctx context.Context, db string, cmd any, rp *readpref.ReadPref) (bson.Raw, error) {
	if rp == nil {
		rp = readpref.Primary()
	}
	res := r.cl.Database(db).RunCommand(ctx, r.opts.withGossip(cmd), options.RunCmd().SetReadPreference(rp))
	raw, err := res.Raw()
	if err != nil {
		return nil, fmt.Errorf("%s on replica set %s: %w", commandName(cmd), r.hosts.SetName, err)
	}
	return raw, nil
}

// Client is the underlying driver client, for callers that need more than RunCommand (e.g.
// cursors). Its default read preference is primary.
func (r *ReplicaSet) Client() *mongo.Client { return r.cl }

// Close disconnects; ctx bounds the wait for in-use connections, and at most closeWait
// does: the driver's Disconnect first sends endSessions, which waits for a server it can
// select, and a server's clients to other members are closed when those may be gone already
// (a shard shutting down after the shard it talked to). The sessions it would end expire on
// their own.
func (r *ReplicaSet) Close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, closeWait)
	defer cancel()
	return r.cl.Disconnect(ctx)
}

// closeWait bounds Close.
const closeWait = 500 * time.Millisecond

// commandName is the first key of cmd, for error messages.
func commandName(cmd any) string {
	switch c := cmd.(type) {
	case bson.D:
		if len(c) > 0 {
			return c[0].Key
		}
	case bson.Raw:
		if e, err := c.IndexErr(0); err == nil {
			return e.Key()
		}
	}
	return "command"
}
