package vclock

// Signed cluster time (spec: sharding.md "SignedComponentFormat: ClusterTime signing";
// checklist-sharding.md 5 "Gossip + signing"; MongoDB's TimeProofService,
// LogicalTimeValidator and VectorClock::SignedComponentFormat).
//
// A $clusterTime a node sends carries {hash, keyId}: the HMAC-SHA1, under signing key keyId,
// of the time. Clients cannot make one, so a node that receives a $clusterTime above its own
// clock can tell a time another node really reached from a forged one (a forged time far
// ahead would leave no room to tick: every write would then fail until the data is dumped and
// restored). The rules apply under authorization only; without it every sender is trusted,
// and gets (and may send) the zero signature, as MongoDB does.
//
// Sending (Clock.SignatureFor): a sender that may advance the clock itself (advanceClusterTime
// on the cluster: __system, the keyfile's internal user) gets the zero signature; anyone else
// gets a real one, or no $clusterTime (and no operationTime) at all until the node has a key.
//
// Receiving (Clock.GossipIn): a time at or below the node's own is taken without a check;
// above it, from a sender without advanceClusterTime, the signature must validate
// (TimeProofMismatch, or KeyNotFound for an unknown keyId) or the command fails before it
// runs and the clock does not move. An unauthenticated sender's unsigned time is ignored.

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/binary"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
)

// Signature is $clusterTime's signature: a proof of the time and the key that made it. The
// zero value is the "dummy" signature of an unsigned time.
type Signature struct {
	Hash  [KeyLen]byte
	KeyID int64
}

// IsZero reports the dummy signature's hash (all zero bytes, whatever the keyId).
func (s Signature) IsZero() bool { return s.Hash == [KeyLen]byte{} }

// proofRangeMask is the increment bits one proof covers (TimeProofService's kRangeMask): a
// proof is made for the top of its time's range, so the cluster time can move 65535 ticks
// within a second with one HMAC, and a signed time proves any time up to its range's top.
const proofRangeMask = 0xFFFF

func proofCeil(t optime.Timestamp) optime.Timestamp { return t | proofRangeMask }

// Proof is the proof of t under secret (TimeProofService::getProof): HMAC-SHA1 over the top
// of t's proof range as 8 little-endian bytes (LogicalTime::toUnsignedArray).
func Proof(secret [KeyLen]byte, t optime.Timestamp) [KeyLen]byte {
	var msg [8]byte
	binary.LittleEndian.PutUint64(msg[:], uint64(proofCeil(t)))
	m := hmac.New(sha1.New, secret[:])
	m.Write(msg[:])
	var out [KeyLen]byte
	copy(out[:], m.Sum(nil))
	return out
}

func proofsEqual(a, b [KeyLen]byte) bool { return hmac.Equal(a[:], b[:]) }

// Peer is what a node knows of the sender of a request, as far as gossip is concerned
// (MongoDB's AuthorizationSession and the internal-client tag VectorClock::gossipIn reads).
// The zero value is a sender under no authorization: trusted with $clusterTime, not a member.
type Peer struct {
	// Member: a cluster member's connection (service.Conn.IsInternal: its handshake said so
	// and, under authorization, it authenticated as the keyfile's __system user).
	Member bool
	// Authorization is on: signatures and privileges apply. Off, every sender may advance
	// the clock and gets the zero signature (the fields below are then ignored).
	Authorization bool
	// System: authenticated as __system: a request of it that carries $configTime is a
	// member's, as without authorization any such request is.
	System bool
	// MayAdvance: the sender holds advanceClusterTime on the cluster (or uses the localhost
	// exception): its $clusterTime is taken unchecked and it gets the zero signature.
	MayAdvance bool
	// Authenticated: the sender authenticated (or uses the localhost exception).
	Authenticated bool
}

// IsMember reports whether a request with gossip g from p is a cluster member's: its
// connection is, or it carries $configTime (which only members send) and p may be believed
// about it (no authorization, or __system).
func (p Peer) IsMember(g Gossip) bool {
	return p.Member || g.Internal && (!p.Authorization || p.System)
}

func (p Peer) mayAdvance() bool { return !p.Authorization || p.MayAdvance }

// SetKeys gives the clock the keyring it signs and validates $clusterTime with (nil: none; a
// node under authorization then sends no $clusterTime to senders that may not advance the
// clock, and refuses their times above its own).
func (c *Clock) SetKeys(k *Keyring) { c.keys.Store(k) }

// Keys is the clock's keyring (nil when none).
func (c *Clock) Keys() *Keyring { return c.keys.Load() }

// GossipIn advances the clock from gossip g a request from p carries (VectorClock::gossipIn:
// SignedComponentFormat::in, then the rate limiter of Advance). Its ClusterTime is checked
// first (see the file comment): an error leaves the clock as it was. The caller has already
// dropped the components p may not send ($configTime, $topologyTime from non-members).
func (c *Clock) GossipIn(ctx context.Context, g Gossip, p Peer) error {
	t := g.Time
	if !t.Cluster.IsNull() && !p.mayAdvance() {
		switch {
		case g.Signature.IsZero() && !p.Authenticated:
			// An unauthenticated client's unsigned time is ignored, not refused: drivers
			// gossip before they authenticate what an earlier deployment gave them.
			t.Cluster = 0
		case t.Cluster <= c.ClusterTime():
			// Nothing to prove: the time moves nothing (the validator's shortcut for a time
			// it has already seen).
		default:
			k := c.Keys()
			if k == nil {
				return mongoerr.Newf(mongoerr.CannotVerifyAndSignLogicalTime,
					"Cannot accept logicalTime: { ts: %s }. May not be a part of a sharded cluster", t.Cluster)
			}
			if err := k.Validate(ctx, t.Cluster, g.Signature); err != nil {
				return err
			}
		}
	}
	return c.Advance(t)
}

// SignatureFor is the signature of ct in a reply (or request) to p
// (SignedComponentFormat::out). ok false: send no $clusterTime, and no operationTime, since
// the node has no key to sign ct with and p may not be given an unsigned time.
func (c *Clock) SignatureFor(ct optime.Timestamp, p Peer) (sig Signature, ok bool) {
	if p.mayAdvance() {
		return Signature{}, true
	}
	k := c.Keys()
	if k == nil {
		return Signature{}, false
	}
	return k.Sign(ct)
}

// AppendSignedClusterTime appends $clusterTime in the SignedComponentFormat: {clusterTime,
// signature: {hash, keyId}}.
func AppendSignedClusterTime(dst []byte, ct optime.Timestamp, sig Signature) []byte {
	ci, dst := bsoncore.AppendDocumentElementStart(dst, "$clusterTime")
	dst = bsoncore.AppendTimestampElement(dst, "clusterTime", ct.Secs(), ct.Inc())
	si, dst := bsoncore.AppendDocumentElementStart(dst, "signature")
	dst = bsoncore.AppendBinaryElement(dst, "hash", 0, sig.Hash[:])
	dst = bsoncore.AppendInt64Element(dst, "keyId", sig.KeyID)
	dst, _ = bsoncore.AppendDocumentEnd(dst, si)
	dst, _ = bsoncore.AppendDocumentEnd(dst, ci)
	return dst
}

// readSignature reads $clusterTime.signature. A missing or malformed one is the zero
// signature (a wrong-length hash proves nothing, as a zero one does not).
func readSignature(ct bsoncore.Document) Signature {
	var s Signature
	sd, ok := ct.Lookup("signature").DocumentOK()
	if !ok {
		return s
	}
	if sub, h, ok := sd.Lookup("hash").BinaryOK(); ok && sub == 0 && len(h) == KeyLen {
		copy(s.Hash[:], h)
	}
	s.KeyID, _ = sd.Lookup("keyId").AsInt64OK()
	return s
}
