// Package changestream serves change streams: `$changeStream` as the first stage of an
// aggregate on a collection, a database or the whole cluster, tailing the majority-committed
// oplog and turning its entries into change events (spec: execution.md "Oplog Collection"
// and "Oplog Visibility", replication.md "Read Concern"; MongoDB's
// document_source_change_stream*). Subpackages: resumetoken (the events' `_id`), event (one
// oplog entry to its events).
package changestream
