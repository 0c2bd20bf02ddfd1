// This file holds the catalog's public types; doc.go is the package documentation.

package catalog

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/optime"
	"humongo/internal/storage"
)

// UUID is a collection's (or index build's) identity: stable for the collection's lifetime,
// across renames, and equal on every node. Stored as BSON binary subtype 4. It is the server's
// one UUID type: logical session ids (txn/lsc) use it too, catalog being the lowest layer that
// needs one.
type UUID [16]byte

// NewUUID returns a random (version 4, RFC 4122 variant) UUID.
func NewUUID() UUID {
	var u UUID
	// crypto/rand.Read never returns an error since Go 1.24 (it crashes the program instead).
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// String formats u as 8-4-4-4-12 lowercase hex, as MongoDB prints UUID("...").
func (u UUID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], u[10:16])
	return string(b[:])
}

// ParseUUID parses the 8-4-4-4-12 hex form (dashes optional).
func ParseUUID(s string) (UUID, error) {
	var u UUID
	h := strings.ReplaceAll(s, "-", "")
	if len(h) != 32 {
		return u, fmt.Errorf("catalog: invalid UUID %q", s)
	}
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return u, fmt.Errorf("catalog: invalid UUID %q: %w", s, err)
	}
	return u, nil
}

// Compare orders UUIDs bytewise (the CollectionCatalog iterates a database in this order).
func (u UUID) Compare(o UUID) int { return strings.Compare(string(u[:]), string(o[:])) }

// IndexMeta is one entry of md.indexes: an index's durable metadata. Immutable once published
// in a Snapshot; DDL builds a new value.
type IndexMeta struct {
	// Spec is the index specification as stored: {v, key, name, ...options}.
	Spec bsoncore.Document
	// Name is Spec.name; KeyPattern is Spec.key.
	Name       string
	KeyPattern bsoncore.Document
	// Ident is the storage table holding the index keys.
	Ident string
	// Ready is false while the index is being built; only ready indexes serve reads and are
	// checked by validate.
	Ready bool
	// Multikey is true once any document produced several keys; it never reverts.
	Multikey bool
	// MultikeyPaths has one entry per KeyPattern field (in order); entry i[j] is true when
	// the j-th dotted component of field i was an array in some document. nil when the index
	// type does not track paths (then Multikey alone is authoritative).
	MultikeyPaths [][]bool
	// BuildUUID names the in-progress index build (nil once committed).
	BuildUUID *UUID

	// Options decoded from Spec for convenience.
	Version                 int32
	Unique, Sparse, Hidden  bool
	PartialFilterExpression bsoncore.Document // nil when absent
	Collation               bsoncore.Document // nil when absent
	ExpireAfterSeconds      *int64            // TTL; nil when absent
}

// IsIDIndex reports whether m is the _id index.
func (m *IndexMeta) IsIDIndex() bool { return m.Name == IDIndexName }

// IDIndexName is the name of the _id index, which cannot be dropped.
const IDIndexName = "_id_"

// CollectionMeta is a collection's metadata (the Collection object of the spec, minus the
// storage handles). Immutable once published in a Snapshot; DDL builds a new value
// (copy-on-write), so readers may keep a pointer for as long as they like.
type CollectionMeta struct {
	// CatalogID is the collection's key in the durable catalog.
	CatalogID int64
	// NS is "db.coll".
	NS string
	// UUID survives renames.
	UUID UUID
	// Ident is the record store's storage table.
	Ident string
	// Options are the create options as stored in md.options, uuid included.
	Options bsoncore.Document
	// Indexes are in catalog order (the _id index first when present).
	Indexes []IndexMeta
	// MinValidSnapshot is the commit timestamp of the last DDL that changed this collection's
	// metadata (0 for metadata loaded from disk at startup). A read at an older timestamp must
	// not use this instance: use Catalog.At instead.
	MinValidSnapshot optime.Timestamp
	// MinValidLoaded: MinValidSnapshot is the bound of a load from disk (startup, recovery),
	// not a DDL's commit timestamp, so an older read may still be valid for this collection
	// (compare with Catalog.At at the read's timestamp).
	MinValidLoaded bool

	// Decoded from Options for convenience.
	Capped    bool
	Clustered bool
	// PreAndPostImages is options.changeStreamPreAndPostImages.enabled: every update,
	// replace and delete of the collection records its pre-image in config.system.preimages
	// (MongoDB 6.0's changeStreamPreAndPostImages; internal/changestream/images).
	PreAndPostImages bool
}

// DB returns the database part of NS.
func (m *CollectionMeta) DB() string { db, _, _ := strings.Cut(m.NS, "."); return db }

// Coll returns the collection part of NS.
func (m *CollectionMeta) Coll() string { _, c, _ := strings.Cut(m.NS, "."); return c }

// Index returns the index named name.
func (m *CollectionMeta) Index(name string) (*IndexMeta, bool) {
	for i := range m.Indexes {
		if m.Indexes[i].Name == name {
			return &m.Indexes[i], true
		}
	}
	return nil, false
}

// ReadyIndexes returns the ready indexes (those that serve reads and validate checks).
func (m *CollectionMeta) ReadyIndexes() []*IndexMeta {
	out := make([]*IndexMeta, 0, len(m.Indexes))
	for i := range m.Indexes {
		if m.Indexes[i].Ready {
			out = append(out, &m.Indexes[i])
		}
	}
	return out
}

// Snapshot is one immutable CollectionCatalog instance. Readers obtain it from Latest (lock
// free) or At (point in time) and never observe later DDL through it.
type Snapshot struct {
	byNS   map[string]*CollectionMeta
	byUUID map[UUID]*CollectionMeta
	byID   map[int64]*CollectionMeta
	byDB   map[string][]*CollectionMeta // sorted by UUID
	// ddlTs is the largest DDL commit timestamp this instance reflects; reads at timestamps
	// >= ddlTs may use it (see Catalog.At).
	ddlTs optime.Timestamp
}

// ByNS looks a collection up by namespace.
func (s *Snapshot) ByNS(ns string) (*CollectionMeta, bool) { m, ok := s.byNS[ns]; return m, ok }

// ByUUID looks a collection up by UUID.
func (s *Snapshot) ByUUID(u UUID) (*CollectionMeta, bool) { m, ok := s.byUUID[u]; return m, ok }

// ByCatalogID looks a collection up by catalog id.
func (s *Snapshot) ByCatalogID(id int64) (*CollectionMeta, bool) { m, ok := s.byID[id]; return m, ok }

// Collections returns db's collections in UUID order (a fresh slice).
func (s *Snapshot) Collections(db string) []*CollectionMeta {
	return append([]*CollectionMeta(nil), s.byDB[db]...)
}

// All returns every collection, by namespace.
func (s *Snapshot) All() []*CollectionMeta {
	out := make([]*CollectionMeta, 0, len(s.byNS))
	for _, m := range s.byNS {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NS < out[j].NS })
	return out
}

// Databases returns the names of databases with at least one collection, sorted.
func (s *Snapshot) Databases() []string {
	out := make([]string, 0, len(s.byDB))
	for db := range s.byDB {
		out = append(out, db)
	}
	sort.Strings(out)
	return out
}

// Len is the number of collections.
func (s *Snapshot) Len() int { return len(s.byNS) }

// DDLTimestamp is the largest DDL commit timestamp reflected in s (its minimum valid
// snapshot as a whole).
func (s *Snapshot) DDLTimestamp() optime.Timestamp { return s.ddlTs }

// Config tunes a Catalog. The zero value is the production default.
type Config struct {
	// ReapInterval is how often the drop-pending reaper re-checks the oldest and stable
	// timestamps (the spec's TimestampMonitor period). Default 1 s. Reap can also be
	// triggered with Catalog.ReapNow.
	ReapInterval time.Duration
	// Logger receives STORAGE component logs (default slog.Default()).
	Logger *slog.Logger
}

// Catalog is the durable catalog plus the latest CollectionCatalog instance and the
// drop-pending ident reaper. Safe for concurrent use.
type Catalog struct {
	e   *storage.Engine
	cfg Config

	// rs is `_mdb_catalog` (timestamped: rolled back with the data by RecoverToStable);
	// localRS is `_mdb_catalog_local` (untimestamped) holding the entries of the `local`
	// database, whose tables are untimestamped too (see doc.go).
	rs      *storage.RecordStore
	localRS *storage.RecordStore

	latest atomic.Pointer[Snapshot]

	// ddlMu serializes DDL units: it is taken by a unit's first DDL call and released when
	// that unit commits (after the new Snapshot is installed) or rolls back; a transaction's
	// unit holds it during each DDL call only.
	ddlMu sync.Mutex

	// mu guards the fields below and the installation of new snapshots (short sections).
	mu sync.Mutex
	// units holds the pending catalog changes of each open WriteUnitOfWork that touched the
	// catalog.
	units map[*storage.RecoveryUnit]*unitState
	// nextLocalID is the next (negative) catalog id for an entry of the local database.
	nextLocalID int64
	// ddlActive counts units that made DDL changes and have not ended (At's fast path must
	// not race a DDL commit).
	ddlActive atomic.Int32
	// txnDDL counts transactions' units with DDL changes (LatestFor's fast path).
	txnDDL atomic.Int32
	// reserved maps each namespace created by a transaction's uncommitted unit to that unit
	// (see doc.go, "DDL in multi-document transactions").
	reserved map[string]*unitState

	log *slog.Logger

	reaper *reaper
}
