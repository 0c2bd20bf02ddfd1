// Package vclock is the vector clock (spec: sharding.md "The vector clock and causal
// consistency"; checklist-sharding.md section 5): ClusterTime, ConfigTime and TopologyTime,
// each a LogicalTime (a Timestamp: unix seconds and a counter) that only moves forward.
//
// Every server owns one Clock. Components advance by gossip (Advance, from the $clusterTime,
// $configTime and $topologyTime a message carries) and are ticked only by the servers that
// own them: ClusterTime by data nodes writing their oplog (the replication layer advances it
// to each entry it writes), ConfigTime by config servers to their majority commit point,
// TopologyTime by config servers to the time of a shard's addition or removal. A router
// never ticks; it only advances.
//
// The components keep ClusterTime >= ConfigTime >= TopologyTime at every instant: writers
// store ClusterTime first and TopologyTime last, readers load TopologyTime first and
// ClusterTime last, so a Now snapshot satisfies the relation without a lock (each later
// load can only see a larger value).
//
// Gossip rules (ReadGossip, AppendGossip): $clusterTime goes to everyone; $configTime and
// $topologyTime only between cluster members. MongoDB tells members by the internalClient
// field of their hello; Humongo's members talk through the Go driver, whose handshake cannot
// carry that field, so a request that carries $configTime marks its sender as a member (no
// driver sends it), and only such requests get $configTime and $topologyTime back. Under
// authorization a sender is a member only once it authenticated as __system (Peer.IsMember).
//
// $clusterTime is signed (signing.go, spec: sharding.md "SignedComponentFormat: ClusterTime
// signing"): an HMAC-SHA1 proof under a key of admin.system.keys (keys.go, "Key management"),
// so that under authorization a client can send back a time a node reached but not make one
// up.
package vclock

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
)

// DefaultMaxDriftSecs is maxAcceptableLogicalClockDriftSecs's default: one year.
const DefaultMaxDriftSecs = 365 * 24 * 60 * 60

// Time is a snapshot of the three components.
type Time struct {
	Cluster, Config, Topology optime.Timestamp
}

// Clock is one server's vector clock. The zero value is ready, with every component null.
type Clock struct {
	cluster, config, topology atomic.Uint64

	// MaxDriftSecs bounds how far ahead of the wall clock gossip may move a component
	// (maxAcceptableLogicalClockDriftSecs); 0 means DefaultMaxDriftSecs.
	MaxDriftSecs atomic.Int64
	// Now is the wall clock (time.Now when nil; tests set it).
	Now func() time.Time

	// configSource is a config server's commit point, which ConfigTime follows.
	configSource atomic.Pointer[func() optime.Timestamp]

	// keys signs and validates $clusterTime (signing.go); nil until the node has them.
	keys atomic.Pointer[Keyring]
}

// FollowConfigSource makes a config server's ConfigTime tick to source() (its majority
// commit point) whenever the clock is read. Ticking on read is enough: only gossip shows
// the value, and every gossip reads it.
func (c *Clock) FollowConfigSource(source func() optime.Timestamp) { c.configSource.Store(&source) }

// Time returns a consistent snapshot: Cluster >= Config >= Topology.
func (c *Clock) Time() Time {
	if src := c.configSource.Load(); src != nil {
		c.TickConfigTo((*src)())
	}
	topo := c.topology.Load()
	cfg := c.config.Load()
	return Time{Cluster: optime.Timestamp(c.cluster.Load()), Config: optime.Timestamp(cfg), Topology: optime.Timestamp(topo)}
}

// ClusterTime is the ClusterTime component alone.
func (c *Clock) ClusterTime() optime.Timestamp { return optime.Timestamp(c.cluster.Load()) }

// raise moves v up to ts (never down).
func raise(v *atomic.Uint64, ts optime.Timestamp) {
	for {
		cur := v.Load()
		if uint64(ts) <= cur || v.CompareAndSwap(cur, uint64(ts)) {
			return
		}
	}
}

// AdvanceCluster moves ClusterTime forward to ts, trusted: the node's own oplog or a value
// already checked. It never fails.
func (c *Clock) AdvanceCluster(ts optime.Timestamp) { raise(&c.cluster, ts) }

// Advance moves every component of t forward (gossip), after checking each against the
// wall clock as MongoDB's rate limiter does. Components of t that are null are ignored.
// Keeps the relation: a larger Topology raises Config and Cluster first.
func (c *Clock) Advance(t Time) error {
	if err := c.check("clusterTime", t.Cluster); err != nil {
		return err
	}
	if err := c.check("configTime", t.Config); err != nil {
		return err
	}
	if err := c.check("topologyTime", t.Topology); err != nil {
		return err
	}
	c.set(t)
	return nil
}

// set raises the components in the order that keeps the relation at every instant.
func (c *Clock) set(t Time) {
	cfg := max(t.Config, t.Topology)
	raise(&c.cluster, max(t.Cluster, cfg))
	raise(&c.config, cfg)
	raise(&c.topology, t.Topology)
}

// TickConfigTo is a config server's tick of ConfigTime to its majority commit point.
func (c *Clock) TickConfigTo(ts optime.Timestamp) { c.set(Time{Config: ts}) }

// TickTopologyTo is a config server's tick of TopologyTime to the time of a committed
// change of the shard list.
func (c *Clock) TickTopologyTo(ts optime.Timestamp) { c.set(Time{Topology: ts}) }

// check is MongoDB's rate limiter for one gossiped component: not more than MaxDriftSecs
// ahead of the wall clock (ClusterTimeFailsRateLimiter), and not at the end of time (40484),
// which would leave no room to tick.
func (c *Clock) check(name string, ts optime.Timestamp) error {
	if ts.IsNull() {
		return nil
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	wall := uint32(now().Unix())
	drift := c.MaxDriftSecs.Load()
	if drift <= 0 {
		drift = DefaultMaxDriftSecs
	}
	if secs := ts.Secs(); secs > wall && int64(secs-wall) > drift {
		return mongoerr.Newf(mongoerr.ClusterTimeFailsRateLimiter,
			"New %s, %d, is too far from this node's wall clock time, %d.", name, secs, wall)
	}
	if ts.Secs() > math.MaxInt32 || ts.Inc() > math.MaxInt32 {
		return mongoerr.Newf(mongoerr.Location40484, "%s cannot be advanced beyond its maximum value", name)
	}
	return nil
}

// MemberDriverName is the driver name a cluster member's internal client adds to its
// handshake's client metadata (client.driver.name "mongo-go-driver|humongo-member"): the
// server marks such a connection internal, as MongoDB marks one whose hello carried
// internalClient, and treats every request on it as a member's, whether or not that
// request carried $configTime (the driver's own commands, find say, cannot add it). Under
// authorization the claim counts only once the connection authenticated as __system.
const MemberDriverName = "humongo-member"

// WithPeer returns ctx carrying what the server knows of the request's sender (Peer), for the
// gossip of the layers below the server (repl/concern).
func WithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// PeerOf is the Peer ctx carries (the zero Peer when none).
func PeerOf(ctx context.Context) Peer {
	p, _ := ctx.Value(peerKey{}).(Peer)
	return p
}

type peerKey struct{}

// Gossip is what a message carries: the components it has, $clusterTime's signature, and
// whether its sender claims to be a cluster member (it carried $configTime).
type Gossip struct {
	Time
	Internal bool
	// Signature is the highest $clusterTime's signature (zero when it has none).
	Signature Signature
}

// ReadGossip reads $clusterTime (its clusterTime and signature), $configTime and
// $topologyTime from a command or a reply. Malformed fields are ignored, as a missing one (the
// generic argument parser has already accepted them; MongoDB ignores what it cannot use for
// gossip).
func ReadGossip(doc bsoncore.Document) Gossip {
	var g Gossip
	elems, err := doc.Elements()
	if err != nil {
		return g
	}
	for _, e := range elems {
		switch e.Key() {
		case "$clusterTime":
			if d, ok := e.Value().DocumentOK(); ok {
				// The highest when repeated: a router's request carries its own (a
				// transaction's atClusterTime) before the one its driver appends.
				if t, i, ok := d.Lookup("clusterTime").TimestampOK(); ok && optime.MakeTimestamp(t, i) > g.Cluster {
					g.Cluster = optime.MakeTimestamp(t, i)
					g.Signature = readSignature(d)
				}
			}
		case "$configTime":
			if t, i, ok := e.Value().TimestampOK(); ok {
				g.Config = optime.MakeTimestamp(t, i)
				g.Internal = true
			}
		case "$topologyTime":
			if t, i, ok := e.Value().TimestampOK(); ok {
				g.Topology = optime.MakeTimestamp(t, i)
			}
		}
	}
	return g
}

// AppendClusterTime appends $clusterTime with the zero signature (hash of 20 zero bytes,
// keyId 0): what a sender that may advance the clock gets (and every sender without
// authorization), and what a member's internal requests carry (their receiver trusts
// __system).
func AppendClusterTime(dst []byte, ct optime.Timestamp) []byte {
	return AppendSignedClusterTime(dst, ct, Signature{})
}

// AppendMemberGossip appends $configTime and $topologyTime (PlainComponentFormat: a bare
// Timestamp) to a document being built. Only for members (Gossip.Internal), and only null
// components are left out.
func AppendMemberGossip(dst []byte, t Time) []byte {
	if !t.Config.IsNull() {
		dst = bsoncore.AppendTimestampElement(dst, "$configTime", t.Config.Secs(), t.Config.Inc())
	}
	if !t.Topology.IsNull() {
		dst = bsoncore.AppendTimestampElement(dst, "$topologyTime", t.Topology.Secs(), t.Topology.Inc())
	}
	return dst
}

// WithMemberGossip returns doc with $configTime and $topologyTime added (a request a member
// sends to another member, or a reply to a member).
func WithMemberGossip(doc bsoncore.Document, t Time) bsoncore.Document {
	if len(doc) < 5 || (t.Config.IsNull() && t.Topology.IsNull()) {
		return doc
	}
	out := make([]byte, 0, len(doc)+48)
	out = append(out, doc[:len(doc)-1]...)
	out = AppendMemberGossip(out, t)
	out = append(out, 0)
	return bsoncore.UpdateLength(out, 0, int32(len(out)))
}

// WithMemberRequestGossip is WithMemberGossip for a request a member sends: $configTime is
// always there, null until the sender knows one, because it is what marks the sender as a
// member (Gossip.Internal) and so gets the receiver's own $configTime back; without it a
// router that starts at null would never learn one.
func WithMemberRequestGossip(doc bsoncore.Document, t Time) bsoncore.Document {
	if len(doc) < 5 {
		return doc
	}
	out := make([]byte, 0, len(doc)+48)
	out = append(out, doc[:len(doc)-1]...)
	out = bsoncore.AppendTimestampElement(out, "$configTime", t.Config.Secs(), t.Config.Inc())
	if !t.Topology.IsNull() {
		out = bsoncore.AppendTimestampElement(out, "$topologyTime", t.Topology.Secs(), t.Topology.Inc())
	}
	out = append(out, 0)
	return bsoncore.UpdateLength(out, 0, int32(len(out)))
}

func (t Time) String() string {
	return fmt.Sprintf("{clusterTime: %s, configTime: %s, topologyTime: %s}", t.Cluster, t.Config, t.Topology)
}
