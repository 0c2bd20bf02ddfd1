package vclock

import (
	"context"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
)

func testSecret() [KeyLen]byte {
	var s [KeyLen]byte
	for i := range s {
		s[i] = byte(i + 1)
	}
	return s
}

// The proof is MongoDB's: HMAC-SHA1 over the top of the time's range (increment | 0xFFFF) as
// 8 little-endian bytes. The digests were computed independently (Python's hmac).
func TestProofIsHMACOfTheRangeTopLittleEndian(t *testing.T) {
	for _, c := range []struct {
		t    optime.Timestamp
		want string
	}{
		{ts(1, 2), "0bfdb1e989e46f5a425361c326688f6300eb7afe"},
		{optime.Timestamp(0x6500000012345678), "907ec930d981cddf7003809dff6b967b47e57e8f"},
	} {
		p := Proof(testSecret(), c.t)
		if got := hex.EncodeToString(p[:]); got != c.want {
			t.Errorf("Proof(%s) = %s, want %s", c.t, got, c.want)
		}
	}
	// One proof covers its range, and only it.
	if Proof(testSecret(), ts(1, 0)) != Proof(testSecret(), ts(1, 0xFFFF)) {
		t.Error("times of one range have different proofs")
	}
	if Proof(testSecret(), ts(1, 0xFFFF)) == Proof(testSecret(), ts(1, 0x10000)) {
		t.Error("times of two ranges share a proof")
	}
}

// staticSource serves a fixed set of keys and counts reads.
type staticSource struct {
	mu    sync.Mutex
	keys  []Key
	reads atomic.Int32
	err   error
}

func (s *staticSource) KeysAfter(_ context.Context, after optime.Timestamp) ([]Key, error) {
	s.reads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	var out []Key
	for _, k := range s.keys {
		if k.ExpiresAt > after {
			out = append(out, k)
		}
	}
	return out, nil
}

func (s *staticSource) add(k Key) {
	s.mu.Lock()
	s.keys = append(s.keys, k)
	s.mu.Unlock()
}

func key(id int64, expSecs uint32, b byte) Key {
	k := Key{ID: id, ExpiresAt: ts(expSecs, 0)}
	for i := range k.Secret {
		k.Secret[i] = b
	}
	return k
}

func codeOf(err error) mongoerr.Code { return mongoerr.CodeOf(err) }

// Signing picks the first key still valid at the time; validation finds the key by id and
// checks the proof: a wrong hash is TimeProofMismatch, an unknown id KeyNotFound (after a
// refresh that could not find it either), an id whose key had expired by then too.
func TestKeyringSignAndValidate(t *testing.T) {
	src := &staticSource{keys: []Key{key(100, 1000, 1), key(101, 2000, 2)}}
	k := NewKeyring(src)
	ctx := context.Background()
	if _, ok := k.Sign(ts(500, 1)); ok {
		t.Fatal("signed without keys")
	}
	if err := k.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	sig, ok := k.Sign(ts(500, 1))
	if !ok || sig.KeyID != 100 || sig.Hash != Proof(src.keys[0].Secret, ts(500, 1)) {
		t.Fatalf("sign at 500: %+v %v", sig, ok)
	}
	if sig2, _ := k.Sign(ts(1000, 0)); sig2.KeyID != 101 {
		t.Fatalf("a key expiring at 1000 signed time 1000: %+v", sig2)
	}
	if _, ok := k.Sign(ts(2000, 0)); ok {
		t.Fatal("signed past the last key")
	}
	if err := k.Validate(ctx, ts(500, 1), sig); err != nil {
		t.Fatalf("own signature: %v", err)
	}
	// The proof covers the rest of its range, not the next one.
	if err := k.Validate(ctx, ts(500, 0xFFFF), sig); err != nil {
		t.Fatalf("same range: %v", err)
	}
	if err := k.Validate(ctx, ts(501, 1), sig); codeOf(err) != mongoerr.TimeProofMismatch {
		t.Fatalf("another time with the signature: %v", err)
	}
	bad := sig
	bad.Hash[0] ^= 1
	if err := k.Validate(ctx, ts(500, 1), bad); codeOf(err) != mongoerr.TimeProofMismatch {
		t.Fatalf("wrong hash: %v", err)
	}
	reads := src.reads.Load()
	unknown := Signature{Hash: sig.Hash, KeyID: 7}
	if err := k.Validate(ctx, ts(500, 1), unknown); codeOf(err) != mongoerr.KeyNotFound {
		t.Fatalf("unknown key: %v", err)
	}
	if src.reads.Load() != reads+1 {
		t.Fatalf("an unknown key did not refresh the keyring (%d reads, want %d)", src.reads.Load(), reads+1)
	}
	// Key 100 expired at 1000: it proves nothing of a later time, whatever the hash.
	late := Signature{Hash: Proof(src.keys[0].Secret, ts(1500, 0)), KeyID: 100}
	if err := k.Validate(ctx, ts(1500, 0), late); codeOf(err) != mongoerr.KeyNotFound {
		t.Fatalf("expired key: %v", err)
	}
}

// A key made after the keyring's last refresh is found by the refresh an unknown keyId
// triggers (a key another node signed with before this one read it).
func TestValidateRefreshesForANewKey(t *testing.T) {
	src := &staticSource{keys: []Key{key(1, 1000, 1)}}
	k := NewKeyring(src)
	ctx := context.Background()
	if err := k.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	newer := key(2, 2000, 9)
	src.add(newer)
	sig := Signature{Hash: Proof(newer.Secret, ts(1500, 3)), KeyID: 2}
	if err := k.Validate(ctx, ts(1500, 3), sig); err != nil {
		t.Fatal(err)
	}
	if got := k.Newest(); got != ts(2000, 0) {
		t.Fatalf("newest %s", got)
	}
}

// Signing reuses the proof of the last range it signed: no HMAC per reply while the time
// stays in one range.
func TestSignCachesTheRangeProof(t *testing.T) {
	k := NewKeyring(&staticSource{})
	k.Add(key(5, 1000, 3))
	a, _ := k.Sign(ts(10, 1))
	c := k.proof.Load()
	b, _ := k.Sign(ts(10, 500))
	if a != b || k.proof.Load() != c {
		t.Fatal("a time of the same range computed a new proof")
	}
	if s, _ := k.Sign(ts(11, 0)); s == a || k.proof.Load() == c {
		t.Fatal("a new range reused the old proof")
	}
}

// Concurrent refreshes share one read of the source.
func TestRefreshIsSingleFlight(t *testing.T) {
	release := make(chan struct{})
	src := &blockingSource{release: release}
	k := NewKeyring(src)
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() { _ = k.Refresh(context.Background()) })
	}
	for src.reads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := src.reads.Load(); n > 2 {
		// The five may straddle two flights at most if one started after the first ended;
		// with the source blocked they all join the first.
		t.Fatalf("%d reads for concurrent refreshes", n)
	}
}

type blockingSource struct {
	release chan struct{}
	reads   atomic.Int32
}

func (s *blockingSource) KeysAfter(ctx context.Context, _ optime.Timestamp) ([]Key, error) {
	s.reads.Add(1)
	<-s.release
	return []Key{key(1, 100, 1)}, nil
}

func signedGossip(ct optime.Timestamp, sig Signature) Gossip {
	return Gossip{Time: Time{Cluster: ct}, Signature: sig}
}

// GossipIn under authorization: a time above the clock needs a valid signature from a sender
// that may not advance the clock; a lower one does not; a sender with advanceClusterTime (or
// without authorization) needs none; an unauthenticated sender's unsigned time is ignored. A
// refused time moves nothing.
func TestGossipInValidates(t *testing.T) {
	var c Clock
	c.Now = func() time.Time { return time.Unix(1_000_000, 0) }
	k := NewKeyring(&staticSource{})
	good := key(9, 2_000_000, 4)
	k.Add(good)
	c.SetKeys(k)
	ctx := context.Background()
	user := Peer{Authorization: true, Authenticated: true}
	c.AdvanceCluster(ts(900_000, 1))

	forged := signedGossip(ts(950_000, 1), Signature{KeyID: 9, Hash: Proof(good.Secret, ts(900_000, 1))})
	if err := c.GossipIn(ctx, forged, user); codeOf(err) != mongoerr.TimeProofMismatch {
		t.Fatalf("forged: %v", err)
	}
	if c.ClusterTime() != ts(900_000, 1) {
		t.Fatalf("a refused time moved the clock: %s", c.ClusterTime())
	}
	if err := c.GossipIn(ctx, signedGossip(ts(950_000, 1), Signature{KeyID: 3}), user); codeOf(err) != mongoerr.KeyNotFound {
		t.Fatalf("unknown key: %v", err)
	}
	// At or below the clock: taken unchecked.
	if err := c.GossipIn(ctx, signedGossip(ts(900_000, 1), Signature{}), user); err != nil {
		t.Fatalf("lower unsigned: %v", err)
	}
	valid := signedGossip(ts(950_000, 1), Signature{KeyID: 9, Hash: Proof(good.Secret, ts(950_000, 1))})
	if err := c.GossipIn(ctx, valid, user); err != nil || c.ClusterTime() != ts(950_000, 1) {
		t.Fatalf("valid: %v, clock %s", err, c.ClusterTime())
	}
	// advanceClusterTime (__system, a custom role) and no authorization skip the check.
	for _, p := range []Peer{{Authorization: true, Authenticated: true, MayAdvance: true}, {}} {
		next := c.ClusterTime() + 1<<32
		if err := c.GossipIn(ctx, signedGossip(next, Signature{}), p); err != nil || c.ClusterTime() != next {
			t.Fatalf("%+v: %v, clock %s", p, err, c.ClusterTime())
		}
	}
	// Unauthenticated and unsigned: ignored, no error.
	before := c.ClusterTime()
	if err := c.GossipIn(ctx, signedGossip(before+1<<32, Signature{}), Peer{Authorization: true}); err != nil || c.ClusterTime() != before {
		t.Fatalf("unauthenticated unsigned: %v, clock %s", err, c.ClusterTime())
	}
	// Without a keyring nothing can be proved.
	var bare Clock
	if err := bare.GossipIn(ctx, valid, user); codeOf(err) != mongoerr.CannotVerifyAndSignLogicalTime {
		t.Fatalf("no keyring: %v", err)
	}
	// The rate limiter still applies after a valid proof: a year ahead is refused.
	far := ts(1_000_000+DefaultMaxDriftSecs+10, 0)
	k.Add(key(10, far.Secs()+10, 5))
	farKey, _ := k.signingKey(far)
	err := c.GossipIn(ctx, signedGossip(far, Signature{KeyID: farKey.ID, Hash: Proof(farKey.Secret, far)}), user)
	if codeOf(err) != mongoerr.ClusterTimeFailsRateLimiter {
		t.Fatalf("far ahead: %v", err)
	}
}

// SignatureFor: the zero signature to senders that may advance the clock (and without
// authorization), a real one to others, none when the node has no key.
func TestSignatureFor(t *testing.T) {
	var c Clock
	user := Peer{Authorization: true, Authenticated: true}
	if sig, ok := c.SignatureFor(ts(5, 1), Peer{}); !ok || sig != (Signature{}) {
		t.Fatalf("no authorization: %+v %v", sig, ok)
	}
	if _, ok := c.SignatureFor(ts(5, 1), user); ok {
		t.Fatal("signed without a keyring")
	}
	k := NewKeyring(&staticSource{})
	c.SetKeys(k)
	if _, ok := c.SignatureFor(ts(5, 1), user); ok {
		t.Fatal("signed without a key")
	}
	k.Add(key(42, 100, 7))
	sig, ok := c.SignatureFor(ts(5, 1), user)
	if !ok || sig.KeyID != 42 || sig.IsZero() {
		t.Fatalf("user: %+v %v", sig, ok)
	}
	if sig, ok := c.SignatureFor(ts(5, 1), Peer{Authorization: true, MayAdvance: true}); !ok || sig != (Signature{}) {
		t.Fatalf("advanceClusterTime: %+v %v", sig, ok)
	}
}

// $clusterTime round-trips with its signature; the highest repeated one keeps its own.
func TestReadGossipSignature(t *testing.T) {
	sig := Signature{KeyID: 77, Hash: Proof(testSecret(), ts(9, 9))}
	b := bsoncore.NewDocumentBuilder().AppendInt32("ping", 1).Build()
	out := append([]byte(nil), b[:len(b)-1]...)
	out = AppendSignedClusterTime(out, ts(9, 9), sig)
	out = AppendClusterTime(out, ts(3, 0))
	out = append(out, 0)
	doc := bsoncore.UpdateLength(out, 0, int32(len(out)))
	g := ReadGossip(doc)
	if g.Cluster != ts(9, 9) || g.Signature != sig {
		t.Fatalf("gossip %+v", g)
	}
	// A hash of the wrong length is the zero signature.
	bad := bsoncore.NewDocumentBuilder().AppendDocument("$clusterTime", bsoncore.NewDocumentBuilder().
		AppendTimestamp("clusterTime", 1, 1).
		AppendDocument("signature", bsoncore.NewDocumentBuilder().AppendBinary("hash", 0, []byte{1, 2}).AppendInt64("keyId", 5).Build()).
		Build()).Build()
	if g := ReadGossip(bad); !g.Signature.IsZero() || g.Signature.KeyID != 5 {
		t.Fatalf("short hash: %+v", g.Signature)
	}
}

// The generator's decision: with no key valid now, a current one and its successor; with
// one, the successor; with two, nothing. Ids are the cluster time, expiries whole seconds.
func TestKeysToCreate(t *testing.T) {
	now := ts(1000, 7)
	got := KeysToCreate(nil, now, 100)
	if len(got) != 2 || got[0].ID != int64(now) || got[0].ExpiresAt != ts(1100, 0) ||
		got[1].ID != int64(now)+1 || got[1].ExpiresAt != ts(1200, 0) {
		t.Fatalf("none valid: %v", got)
	}
	got = KeysToCreate([]Key{{ID: 1, ExpiresAt: ts(1050, 0)}}, now, 100)
	if len(got) != 1 || got[0].ID != int64(now) || got[0].ExpiresAt != ts(1150, 0) {
		t.Fatalf("one valid: %v", got)
	}
	if got := KeysToCreate([]Key{{ID: 1, ExpiresAt: ts(1050, 0)}, {ID: 2, ExpiresAt: ts(1150, 0)}}, now, 100); len(got) != 0 {
		t.Fatalf("two valid: %v", got)
	}
	if got := KeysToCreate(nil, 0, 100); got != nil {
		t.Fatalf("null time: %v", got)
	}
}

func TestRefreshDelay(t *testing.T) {
	for _, c := range []struct {
		now, newest optime.Timestamp
		want        time.Duration
	}{
		{ts(100, 0), 0, RefreshRetryDelay},
		{ts(100, 0), ts(100, 0), RefreshRetryDelay},
		{ts(100, 0), ts(105, 0), 5 * time.Second},
		{ts(100, 0), ts(100_000, 0), time.Minute},
	} {
		if got := RefreshDelay(c.now, c.newest, time.Minute); got != c.want {
			t.Errorf("RefreshDelay(%s, %s) = %v, want %v", c.now, c.newest, got, c.want)
		}
	}
}

func TestKeyDocumentRoundTrip(t *testing.T) {
	k := key(int64(ts(1700000000, 1)), 1800000000, 0xAB)
	got, err := ParseKey(k.Document())
	if err != nil || got != k {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if _, err := ParseKey(bsoncore.NewDocumentBuilder().AppendInt64("_id", 1).Build()); err == nil {
		t.Fatal("parsed a key without key material")
	}
	var me *mongoerr.Error
	_, err = ParseKey(bsoncore.NewDocumentBuilder().AppendString("_id", "x").Build())
	if !errors.As(err, &me) {
		t.Fatalf("uncoded error %v", err)
	}
}
