package bench

import (
	"context"
	"errors"
)

// ErrNotFound is returned by Store reads and updates when the key does not exist.
var ErrNotFound = errors.New("record not found")

// ErrDuplicate is wrapped by Store inserts when a record with the key already exists.
var ErrDuplicate = errors.New("record already exists")

// Store is the database as the benchmark sees it: YCSB's DB interface. Records are documents
// {_id: key, field0: ..., fieldN: ...}. Implementations must be safe for concurrent use by the
// benchmark threads and must not retain the value slices passed in after returning.
type Store interface {
	// Read fetches the whole record with this key.
	Read(ctx context.Context, key string) error
	// Update sets one field of the record.
	Update(ctx context.Context, key, field string, value []byte) error
	// Insert creates a record; fields[i] is the value of "field<i>".
	Insert(ctx context.Context, key string, fields [][]byte) error
	// Scan reads up to limit records in key order starting at startKey, returning how many.
	Scan(ctx context.Context, startKey string, limit int) (int, error)
	// ReadModifyWrite reads the record, then sets one field.
	ReadModifyWrite(ctx context.Context, key, field string, value []byte) error
	// Transfer moves amount from the record `from` to the record `to` atomically, in one
	// multi-document transaction: $inc of the numeric field "balance" (absent means 0) by
	// -amount on from and +amount on to, then commit. It returns ErrNotFound, having changed
	// nothing, if either record does not exist. from and to differ.
	Transfer(ctx context.Context, from, to string, amount int64) error
	// Ping is one round trip that touches no data.
	Ping(ctx context.Context) error
	// Drop removes every record.
	Drop(ctx context.Context) error
	// Count is how many records there are (an estimate from metadata is fine).
	Count(ctx context.Context) (int64, error)
}
