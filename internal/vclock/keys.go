package vclock

// Cluster-time signing keys (spec: sharding.md "Key management"; MongoDB's
// KeysCollectionDocument, KeysCollectionCache, KeysCollectionManager and KeyGenerator).
//
// The keys are documents of admin.system.keys, {_id: NumberLong keyId, purpose: "HMAC", key:
// BinData(0, 20 bytes), expiresAt: Timestamp}, written by the primary of the replica set that
// owns them (a plain replica set's own primary, or the config server primary of a sharded
// cluster) and never deleted, so any time signed in the past can still be checked. Every node
// keeps them in a Keyring, refreshed from a KeySource (its own collection, or the config
// server's), periodically and whenever a signature names a key it does not know.
//
// This file holds the pure parts: the key document, the keyring, the generator's decision
// (KeysToCreate) and the refresher's sleep (RefreshDelay). Reading and writing the collection,
// and the goroutines, belong to the server (internal/commands/clustertime_keys.go).

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/optime"
)

// KeysNS is the collection of the signing keys; KeyPurpose is the purpose of every key this
// package reads or makes (MongoDB's "HMAC").
const (
	KeysNS     = "admin.system.keys"
	KeyPurpose = "HMAC"
)

// DefaultKeyValiditySecs is KeysRotationIntervalSec's default: 90 days, the "3 months" each
// key is valid for.
const DefaultKeyValiditySecs = 90 * 24 * 60 * 60

// KeyLen is the length of a key and of a proof: an HMAC-SHA1 key and digest.
const KeyLen = 20

// Key is one signing key.
type Key struct {
	ID        int64
	Secret    [KeyLen]byte
	ExpiresAt optime.Timestamp
}

// Document is k's admin.system.keys document.
func (k Key) Document() bsoncore.Document {
	return bsoncore.NewDocumentBuilder().
		AppendInt64("_id", k.ID).
		AppendString("purpose", KeyPurpose).
		AppendBinary("key", 0, k.Secret[:]).
		AppendTimestamp("expiresAt", k.ExpiresAt.Secs(), k.ExpiresAt.Inc()).
		Build()
}

// ParseKey reads an admin.system.keys document (MongoDB's KeysCollectionDocument::parse).
func ParseKey(d bsoncore.Document) (Key, error) {
	var k Key
	id, ok := d.Lookup("_id").AsInt64OK()
	if !ok {
		return k, mongoerr.Newf(mongoerr.FailedToParse, "key document has no numeric _id: %s", d)
	}
	sub, secret, ok := d.Lookup("key").BinaryOK()
	if !ok || sub != 0 || len(secret) != KeyLen {
		return k, mongoerr.Newf(mongoerr.FailedToParse, "key document %d: key is not a %d-byte BinData", id, KeyLen)
	}
	t, i, ok := d.Lookup("expiresAt").TimestampOK()
	if !ok {
		return k, mongoerr.Newf(mongoerr.FailedToParse, "key document %d: expiresAt is not a Timestamp", id)
	}
	k.ID, k.ExpiresAt = id, optime.MakeTimestamp(t, i)
	copy(k.Secret[:], secret)
	return k, nil
}

// KeySource reads the signing keys from where they are kept.
type KeySource interface {
	// KeysAfter returns the keys whose expiresAt is after t, in expiresAt order, as far as a
	// majority of the owning replica set has them (a key a failover could roll back must not
	// sign anything).
	KeysAfter(ctx context.Context, t optime.Timestamp) ([]Key, error)
}

// Keyring is a node's cache of the signing keys (MongoDB's KeysCollectionManager over its
// KeysCollectionCache), and what it signs and validates cluster times with (its
// LogicalTimeValidator and TimeProofService). It is safe for concurrent use; signing, on
// every reply, takes no lock.
type Keyring struct {
	src KeySource

	// keys is every key read so far, by ExpiresAt then ID; a refresh swaps in a new slice,
	// never changes one, so readers load it without a lock.
	keys atomic.Pointer[[]Key]

	mu     sync.Mutex
	flight *refreshFlight // the refresh in progress, nil when none; guarded by mu

	// proof is the last proof made for signing: replies sent while the cluster time stays in
	// one proof range (Proof) reuse it instead of computing an HMAC each.
	proof atomic.Pointer[cachedProof]
}

type refreshFlight struct {
	done chan struct{} // closed when err is set
	err  error
}

type cachedProof struct {
	ceil optime.Timestamp // the range's top: the time the HMAC covers
	sig  Signature
}

// NewKeyring returns an empty keyring over src.
func NewKeyring(src KeySource) *Keyring { return &Keyring{src: src} }

func (k *Keyring) loaded() []Key {
	if p := k.keys.Load(); p != nil {
		return *p
	}
	return nil
}

// Keys returns the keys the keyring holds, by expiresAt.
func (k *Keyring) Keys() []Key { return slices.Clone(k.loaded()) }

// Newest is the latest expiresAt among the keys held (null when none).
func (k *Keyring) Newest() optime.Timestamp {
	ks := k.loaded()
	if len(ks) == 0 {
		return 0
	}
	return ks[len(ks)-1].ExpiresAt
}

// Add puts keys into the keyring (tests, and a source that pushes keys).
func (k *Keyring) Add(keys ...Key) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.mergeLocked(keys)
}

func (k *Keyring) mergeLocked(keys []Key) {
	if len(keys) == 0 {
		return
	}
	old := k.loaded()
	out := make([]Key, 0, len(old)+len(keys))
	out = append(out, old...)
	for _, n := range keys {
		if !slices.ContainsFunc(out, func(o Key) bool { return o.ID == n.ID }) {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b Key) int {
		if c := a.ExpiresAt.Compare(b.ExpiresAt); c != 0 {
			return c
		}
		return int(min(max(a.ID-b.ID, -1), 1))
	})
	k.keys.Store(&out)
}

// Refresh reads the keys that expire after the newest one held. Concurrent calls share one
// read; a caller whose ctx ends stops waiting for it (the read goes on for the others).
func (k *Keyring) Refresh(ctx context.Context) error {
	k.mu.Lock()
	if f := k.flight; f != nil {
		k.mu.Unlock()
		select {
		case <-f.done:
			return f.err
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	f := &refreshFlight{done: make(chan struct{})}
	k.flight = f
	after := k.Newest()
	k.mu.Unlock()

	keys, err := k.src.KeysAfter(ctx, after)

	k.mu.Lock()
	if err == nil {
		k.mergeLocked(keys)
	}
	k.flight = nil
	f.err = err
	close(f.done)
	k.mu.Unlock()
	return err
}

// signingKey is the key that signs ct: of the keys still valid at ct, the first to expire
// (KeysCollectionCache::getKey).
func (k *Keyring) signingKey(ct optime.Timestamp) (Key, bool) {
	ks := k.loaded()
	i, _ := slices.BinarySearchFunc(ks, ct, func(key Key, t optime.Timestamp) int {
		if key.ExpiresAt <= t {
			return -1
		}
		return 1
	})
	if i == len(ks) {
		return Key{}, false
	}
	return ks[i], true
}

// validationKey is key id if it is valid at ct (KeysCollectionCache::getKeyById: a key that
// had expired by then signs nothing of that time).
func (k *Keyring) validationKey(id int64, ct optime.Timestamp) (Key, bool) {
	for _, key := range k.loaded() {
		if key.ID == id && key.ExpiresAt >= ct {
			return key, true
		}
	}
	return Key{}, false
}

// Sign returns ct's signature with the key valid at ct (LogicalTimeValidator::
// trySignLogicalTime); false when the keyring has no such key.
func (k *Keyring) Sign(ct optime.Timestamp) (Signature, bool) {
	key, ok := k.signingKey(ct)
	if !ok {
		return Signature{}, false
	}
	ceil := proofCeil(ct)
	if c := k.proof.Load(); c != nil && c.ceil == ceil && c.sig.KeyID == key.ID {
		return c.sig, true
	}
	sig := Signature{Hash: Proof(key.Secret, ct), KeyID: key.ID}
	k.proof.Store(&cachedProof{ceil: ceil, sig: sig})
	return sig, true
}

// maxKeyWait bounds how long a validation waits for the refresh that looks for an unknown
// key (MongoDB's kDefaultRefreshWaitTime).
const maxKeyWait = 30 * time.Second

// Validate checks that sig proves ct (LogicalTimeValidator::validate, without its shortcut
// for times already seen: Clock.GossipIn takes it). A key the keyring does not hold is looked
// for with a refresh first; still missing, it is KeyNotFound. A wrong proof is
// TimeProofMismatch.
func (k *Keyring) Validate(ctx context.Context, ct optime.Timestamp, sig Signature) error {
	key, ok := k.validationKey(sig.KeyID, ct)
	if !ok {
		rctx, cancel := context.WithTimeout(ctx, maxKeyWait)
		_ = k.Refresh(rctx) // a failed refresh leaves the key unknown: KeyNotFound below
		cancel()
		if key, ok = k.validationKey(sig.KeyID, ct); !ok {
			return mongoerr.Newf(mongoerr.KeyNotFound,
				"Cache Reader No keys found for %s that is valid for time: { ts: %s } with id: %d", KeyPurpose, ct, sig.KeyID)
		}
	}
	want := Signature{KeyID: key.ID}
	if c := k.proof.Load(); c != nil && c.ceil == proofCeil(ct) && c.sig.KeyID == key.ID {
		want = c.sig
	} else {
		want.Hash = Proof(key.Secret, ct)
	}
	if !proofsEqual(want.Hash, sig.Hash) {
		return mongoerr.New(mongoerr.TimeProofMismatch, "Proof does not match the cluster time")
	}
	return nil
}

// KeysToCreate is the key generator's decision (MongoDB's
// KeyGenerator::generateNewKeysIfNeeded): given the keys that expire after now (by
// expiresAt), the keys to insert so that one is valid now and another is ready to take over
// when it expires. A key's id is the cluster time it was made at (the next one's that plus
// one), and it expires validFor seconds after the time it takes over from (now for the first
// key). The secrets are left for the caller to draw.
func KeysToCreate(valid []Key, now optime.Timestamp, validForSecs uint32) []Key {
	if now.IsNull() || validForSecs == 0 {
		return nil
	}
	id := int64(now)
	var out []Key
	var current optime.Timestamp // when the key valid now expires
	if len(valid) == 0 {
		current = addSecs(now, validForSecs)
		out = append(out, Key{ID: id, ExpiresAt: current})
		id++
	} else {
		current = valid[0].ExpiresAt
	}
	if len(valid) < 2 {
		out = append(out, Key{ID: id, ExpiresAt: addSecs(current, validForSecs)})
	}
	return out
}

// addSecs is t plus secs seconds, with a zero increment (MongoDB's addSeconds), saturated at
// the largest time.
func addSecs(t optime.Timestamp, secs uint32) optime.Timestamp {
	s := uint64(t.Secs()) + uint64(secs)
	if s > 1<<32-1 {
		s = 1<<32 - 1
	}
	return optime.MakeTimestamp(uint32(s), 0)
}

// Refresh delays (MongoDB's KeysCollectionManager refresh loop).
const (
	// RefreshRetryDelay is the refresher's sleep when it has no key valid now (none made
	// yet, or the source unreachable): short, so signing starts soon after the first key.
	RefreshRetryDelay = 200 * time.Millisecond
)

// RefreshDelay is how long the refresher sleeps after a refresh at now whose newest key
// expires at newest: interval at most, less when the newest key expires sooner (its
// successor must be read before then), RefreshRetryDelay when no key is valid now.
func RefreshDelay(now, newest optime.Timestamp, interval time.Duration) time.Duration {
	if newest.IsNull() || now.Secs() >= newest.Secs() {
		return RefreshRetryDelay
	}
	return max(min(interval, time.Duration(newest.Secs()-now.Secs())*time.Second), RefreshRetryDelay)
}

func (k Key) String() string {
	return fmt.Sprintf("{_id: %d, expiresAt: %s}", k.ID, k.ExpiresAt)
}

// KeysFilter selects the signing keys of admin.system.keys that expire after t.
func KeysFilter(t optime.Timestamp) bsoncore.Document {
	return bsoncore.NewDocumentBuilder().
		AppendString("purpose", KeyPurpose).
		AppendDocument("expiresAt", bsoncore.NewDocumentBuilder().AppendTimestamp("$gt", t.Secs(), t.Inc()).Build()).
		Build()
}

// ParseKeys reads key documents, by expiresAt; a malformed one is skipped (it can sign
// nothing).
func ParseKeys(docs []bsoncore.Document) []Key {
	out := make([]Key, 0, len(docs))
	for _, d := range docs {
		if k, err := ParseKey(d); err == nil {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b Key) int { return cmp.Compare(a.ExpiresAt, b.ExpiresAt) })
	return out
}
