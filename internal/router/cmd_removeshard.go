package router

// removeShard and movePrimary on the router (MongoDB 7.0's RemoveShardCmd and
// MovePrimaryCommand): removeShard runs _configsvrRemoveShard on the config server primary
// and passes its answer through; movePrimary runs _shardsvrMovePrimary on the database's
// primary shard, which moves the database's unsharded collections and commits the new
// primary on the config server.

import (
	"context"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/service"
	"humongo/internal/sharding/ddl"
	"humongo/internal/vclock"
)

// addTopologyCommands registers removeShard and movePrimary.
func addTopologyCommands(r *service.Registry) {
	r.Register(&service.Command{Name: "removeShard", Auth: service.AuthOnCluster(auth.RemoveShard), Aliases: []string{"removeshard"}, Handler: runRemoveShard,
		AdminOnly: true, Secondary: service.SecondaryAlways, Help: "remove a shard from the system."})
	r.Register(&service.Command{Name: "movePrimary", Auth: service.AuthOnFullNS(auth.MoveChunk), Aliases: []string{"moveprimary"}, Handler: runMovePrimary,
		AdminOnly: true, Secondary: service.SecondaryAlways,
		Help: "Reassigns the primary shard holding all un-sharded collections in the database"})
}

// passthroughDrop are the reply fields of a remote command the router does not pass on
// (CommandHelpers::filterCommandReplyForPassthrough plus what the router adds itself).
var passthroughDrop = map[string]bool{"ok": true, "$clusterTime": true, "operationTime": true, "$configTime": true,
	"$topologyTime": true, "$gleStats": true, "lastCommittedOpTime": true, "writeConcernError": true,
	"$configServerState": true, "topologyVersion": true, "errmsg": true, "code": true, "codeName": true}

func passthrough(reply bsoncore.Document) bsoncore.Document {
	b := bsoncore.NewDocumentBuilder()
	elems, _ := reply.Elements()
	for _, e := range elems {
		if k := e.Key(); !passthroughDrop[k] && !strings.HasPrefix(k, "$") {
			b.AppendValue(e.Key(), e.Value())
		}
	}
	return b.Build()
}

// runRemoveShard is {removeShard: "<shard id or connection string>"}: one step of the
// removal (started, ongoing, completed). The router's shard registry is reloaded after each
// step, so a completed removal is forgotten here at once.
func runRemoveShard(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	first, err := cmd.IndexErr(0)
	if err != nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "removeShard: empty command")
	}
	target, ok := first.Value().StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "Field '%s' must be of type string", first.Key())
	}
	reply, err := c.runOnConfig(ctx, bson.D{{Key: "_configsvrRemoveShard", Value: target}})
	if err != nil {
		return nil, err
	}
	// The step is majority committed on the config servers at its operationTime: the
	// ConfigTime the registry's reload reads at (or after) includes it.
	if t, i, ok := reply.Lookup("operationTime").TimestampOK(); ok {
		_ = env.State.Concern.Clock.Advance(vclock.Time{Config: optime.MakeTimestamp(t, i)})
	}
	if err := c.Shards.Reload(ctx); err != nil {
		return nil, err
	}
	return passthrough(reply), nil
}

// runMovePrimary is {movePrimary: "<db>", to: "<shard>"}: _shardsvrMovePrimary on the
// database's primary shard (majority write concern, retried on retriable errors as
// MongoDB's idempotent policy), then the database's cached entry is purged whatever the
// outcome, so the next request reloads it.
func runMovePrimary(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	c, err := cluster(env)
	if err != nil {
		return nil, err
	}
	db, to, err := ddl.ParseMovePrimary(cmd, "movePrimary")
	if err != nil {
		return nil, err
	}
	defer c.Cache.InvalidateDatabase(db)
	fwd := bson.D{{Key: "_shardsvrMovePrimary", Value: db}, {Key: "to", Value: to},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}}
	// Retried across the donor's failover as the other DDL sent to a primary shard
	// (primaryShardDDL): the new primary resumes the coordinator and the retry joins it.
	deadline := time.Now().Add(ddlRetryWindow)
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		err = func() error {
			d, err := c.Cache.Database(ctx, db)
			if err != nil {
				return err
			}
			rs, err := c.Shard(ctx, d.Primary)
			if err != nil {
				return err
			}
			_, err = rs.RunCommand(ctx, "admin", fwd, nil)
			return err
		}()
		if err == nil || ctx.Err() != nil || time.Now().Add(delay).After(deadline) {
			break
		}
		// A primary shard that is no longer the database's answers StaleDbVersion: the
		// cached entry was old, reload it and go to the current primary.
		if code, _ := errorCodeAndReply(err); code == mongoerr.StaleDbVersion {
			c.Cache.InvalidateDatabase(db)
			continue
		} else if !ddlRetriable(err) {
			break
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	if err != nil {
		return nil, remoteError(err)
	}
	return bsoncore.NewDocumentBuilder().Build(), nil
}
