package client

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"humongo/internal/mongoerr"
)

// Host-pinned requests (spec/sharding.md, "Targeting a specific host within a shard"): a
// cursor opened on a member chosen by read preference must be continued (getMore,
// killCursors) on that same member. The driver's selection is not exposed, so SelectHost asks
// the selected member who it is (hello's "me", the member's name in the replica set config,
// the name the driver discovered and Pool dials), and the caller then runs the cursor's
// commands on that host through a Pool client.

// SelectHost returns the member of the replica set that rp (nil: primary) selects now: the
// driver's server selection (mode, tags, maxStalenessSeconds, the latency window) over its
// SDAM view, at the cost of one hello on that member.
func (r *ReplicaSet) SelectHost(ctx context.Context, rp *readpref.ReadPref) (string, error) {
	raw, err := r.RunCommand(ctx, "admin", bson.D{{Key: "hello", Value: 1}}, rp)
	if err != nil {
		return "", err
	}
	me, ok := raw.Lookup("me").StringValueOK()
	if !ok || me == "" {
		return "", mongoerr.Newf(mongoerr.HostUnreachable, "the member of replica set %s selected by %v does not name itself", r.hosts.SetName, rp)
	}
	return me, nil
}

// RunCommand runs cmd against db on host (a directConnection client of the pool; the
// session, if any, comes from ctx and must be one of that client's) with the read
// preference rp sent along, so that a secondary serves the read (secondaryOk). A reply with
// ok: 0 is an error (mongo.CommandError).
func (p *Pool) RunCommand(ctx context.Context, host, db string, cmd any, rp *readpref.ReadPref) (bson.Raw, error) {
	cl, err := p.Get(host)
	if err != nil {
		return nil, err
	}
	return runOn(ctx, cl, p.opts, host, db, cmd, rp)
}

func runOn(ctx context.Context, cl *mongo.Client, o Options, host, db string, cmd any, rp *readpref.ReadPref) (bson.Raw, error) {
	opts := options.RunCmd()
	if rp != nil {
		opts.SetReadPreference(rp)
	}
	raw, err := cl.Database(db).RunCommand(ctx, o.withGossip(cmd), opts).Raw()
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", commandName(cmd), host, err)
	}
	return raw, nil
}
