package lock

import (
	"fmt"
	"sync/atomic"
)

// ResourceType is the level of a resource in the hierarchy.
type ResourceType uint8

// Resource types. The numeric order is the hierarchy order (Mutex is outside it).
const (
	TypeInvalid ResourceType = iota
	TypeGlobal
	TypeDatabase
	TypeCollection
	TypeMutex
	numResourceTypes
)

func (t ResourceType) String() string {
	switch t {
	case TypeGlobal:
		return "Global"
	case TypeDatabase:
		return "Database"
	case TypeCollection:
		return "Collection"
	case TypeMutex:
		return "Mutex"
	}
	return "Invalid"
}

// typeShift places the type in the top 4 bits of an id; the low 60 bits are the name hash.
const (
	typeShift = 60
	hashMask  = 1<<typeShift - 1
)

// The three Global-type resources. Their hash part is an ordinal, in acquisition order.
const (
	globalOrdPBWM   = 1
	globalOrdRSTL   = 2
	globalOrdGlobal = 3
)

// ResourceID identifies a lockable resource. It is comparable and cheap to copy; build it
// once (e.g. in a catalog entry) when a hot path locks the same resource repeatedly.
//
// For a Collection the id also carries its Database's id, so a Locker can check the
// hierarchy without parsing names.
type ResourceID struct {
	id     uint64 // type<<typeShift | hash(name)
	parent uint64 // Collection: id of its Database; otherwise 0
}

// The Global-type resources, taken in this order before any Database lock.
var (
	// ResourcePBWM is the Parallel Batch Writer Mode lock: secondary batch application takes
	// it in X; readers without a timestamp take it in IS so they never see partial batches.
	ResourcePBWM = ResourceID{id: uint64(TypeGlobal)<<typeShift | globalOrdPBWM}
	// ResourceRSTL is the Replication State Transition Lock: operations take it in IX,
	// PRIMARY/SECONDARY/ROLLBACK transitions in X.
	ResourceRSTL = ResourceID{id: uint64(TypeGlobal)<<typeShift | globalOrdRSTL}
	// ResourceGlobal is the Global lock: shutdown and recoverToStableTimestamp take it in X.
	ResourceGlobal = ResourceID{id: uint64(TypeGlobal)<<typeShift | globalOrdGlobal}
)

// hashName is FNV-1a over name, folded to the 60 bits below the type, then mixed with the
// type so that the same name in two types yields unrelated hashes (useful for sharding).
func hashName(t ResourceType, name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	h ^= uint64(t) * 0x9E3779B97F4A7C15
	return uint64(t)<<typeShift | h&hashMask
}

// DatabaseResource returns the id of database db.
func DatabaseResource(db string) ResourceID {
	return ResourceID{id: hashName(TypeDatabase, db)}
}

// CollectionResource returns the id of collection ns ("db.coll"); its parent is the Database
// named by the part before the first dot. A namespace without a dot has the whole string as
// its database, so the hierarchy check still has something to hold on to.
func CollectionResource(ns string) ResourceID {
	return ResourceID{id: hashName(TypeCollection, ns), parent: hashName(TypeDatabase, dbOf(ns))}
}

var mutexSeq atomic.Uint64

// NewMutexResource returns a fresh Mutex resource, outside the hierarchy. As in MongoDB's
// ResourceMutex every call yields a distinct id (the label only documents the call site), so
// two mutexes never share a head by accident.
func NewMutexResource(label string) ResourceID {
	_ = label
	return ResourceID{id: uint64(TypeMutex)<<typeShift | mutexSeq.Add(1)&hashMask}
}

// Type returns the resource's type.
func (r ResourceID) Type() ResourceType {
	t := ResourceType(r.id >> typeShift)
	if t >= numResourceTypes {
		return TypeInvalid
	}
	return t
}

// IsZero reports whether r is the zero (invalid) id.
func (r ResourceID) IsZero() bool { return r.id == 0 }

// Parent returns the Database of a Collection resource, and false for other types.
func (r ResourceID) Parent() (ResourceID, bool) {
	if r.Type() != TypeCollection {
		return ResourceID{}, false
	}
	return ResourceID{id: r.parent}, true
}

func (r ResourceID) String() string {
	switch r {
	case ResourceGlobal:
		return "Global"
	case ResourceRSTL:
		return "ReplicationStateTransition"
	case ResourcePBWM:
		return "ParallelBatchWriterMode"
	}
	return fmt.Sprintf("%s:%#x", r.Type(), r.id&hashMask)
}

// statCategory is where acquisitions of r are counted in serverStatus.locks; the Global-type
// resources each get their own section, as in MongoDB.
func (r ResourceID) statCategory() statCategory {
	switch r {
	case ResourceGlobal:
		return statGlobal
	case ResourceRSTL:
		return statRSTL
	case ResourcePBWM:
		return statPBWM
	}
	switch r.Type() {
	case TypeDatabase:
		return statDatabase
	case TypeCollection:
		return statCollection
	case TypeMutex:
		return statMutex
	}
	return statGlobal
}
