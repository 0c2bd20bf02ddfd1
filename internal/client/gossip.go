package client

// Vector clock gossip on the internal client (spec: sharding.md "The vector clock and causal
// consistency"): a server that gives its clients its Clock (Options.Clock) sends its
// $configTime and $topologyTime with every RunCommand (which marks it as a cluster member to
// the receiver) and advances its clock from every reply the driver receives, cursors
// included. The driver gossips $clusterTime itself. The reply's operationTime is noted in
// the calling operation's OpTimes when its context has one, so a router can answer the
// highest operationTime of the shards it reached.

import (
	"context"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/optime"
	"humongo/internal/vclock"
)

// OpTimes collects the operationTime of every reply an operation receives.
type OpTimes struct{ max atomic.Uint64 }

// Max is the highest operationTime noted (null if none).
func (o *OpTimes) Max() optime.Timestamp { return optime.Timestamp(o.max.Load()) }

func (o *OpTimes) note(ts optime.Timestamp) {
	for {
		cur := o.max.Load()
		if uint64(ts) <= cur || o.max.CompareAndSwap(cur, uint64(ts)) {
			return
		}
	}
}

type opTimesKey struct{}

// WithOpTimes returns ctx carrying o: replies to commands run under it note their
// operationTime there.
func WithOpTimes(ctx context.Context, o *OpTimes) context.Context {
	return context.WithValue(ctx, opTimesKey{}, o)
}

// monitor is the command monitor that reads gossip from replies.
func (o Options) monitor() *event.CommandMonitor {
	clock := o.Clock
	return &event.CommandMonitor{
		Succeeded: func(ctx context.Context, e *event.CommandSucceededEvent) {
			reply := bsoncore.Document(e.Reply)
			// A member's reply within the drift limit moves the clock; one beyond it is
			// ignored, as an unverifiable gossip.
			_ = clock.Advance(vclock.ReadGossip(reply).Time)
			if ots, ok := ctx.Value(opTimesKey{}).(*OpTimes); ok {
				if t, i, ok := reply.Lookup("operationTime").TimestampOK(); ok {
					ots.note(optime.MakeTimestamp(t, i))
				}
			}
		},
	}
}

// withGossip returns cmd with the clock's $configTime and $topologyTime added.
func (o Options) withGossip(cmd any) any {
	if o.Clock == nil {
		return cmd
	}
	t := o.Clock.Time()
	switch c := cmd.(type) {
	case bson.D:
		// $configTime always, null included: it marks this client as a member
		// (vclock.WithMemberRequestGossip).
		out := append(bson.D(nil), c...)
		out = append(out, bson.E{Key: "$configTime", Value: bson.Timestamp{T: t.Config.Secs(), I: t.Config.Inc()}})
		if !t.Topology.IsNull() {
			out = append(out, bson.E{Key: "$topologyTime", Value: bson.Timestamp{T: t.Topology.Secs(), I: t.Topology.Inc()}})
		}
		return out
	case bson.Raw:
		return bson.Raw(vclock.WithMemberRequestGossip(bsoncore.Document(c), t))
	case bsoncore.Document:
		return vclock.WithMemberRequestGossip(c, t)
	}
	return cmd
}
