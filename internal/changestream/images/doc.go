// Package images serves change stream pre- and post-images (MongoDB 6.0's
// changeStreamPreAndPostImages collection option; spec: checklist-replication.md "Change
// streams" for the pre-images collection, and MongoDB's change_stream_pre_images_collection_manager,
// document_source_change_stream_add_pre_image and ..._add_post_image, change_stream_preimage.idl).
//
// # What writes them
//
// Not this package: the write path records pre-images, because it sits below change streams
// (internal/repl/oplog/preimages.go). A collection whose options carry
// changeStreamPreAndPostImages: {enabled: true} (catalog.CollectionMeta.PreAndPostImages) has
// every update, replace and delete record the document before it in config.system.preimages,
// in the write's storage unit and at its oplog entry's timestamp:
//
//	{_id: {nsUUID, ts, applyOpsIndex}, operationTime: <entry wall clock>, preImage: <doc>}
//
// A primary writes them as it logs (the op observer; a transaction at commit, ts being the
// applyOps entry holding the operation and applyOpsIndex its index there); a secondary as it
// applies the oplog, from the document it read before applying the change. The collection
// belongs to each member: its writes are not logged, initial sync neither drops nor clones it.
//
// # What this package does
//
//   - PreImage looks a pre-image up by its id in a snapshot (the stream's
//     fullDocumentBeforeChange); PostImage applies an update entry's o to it (fullDocument:
//     whenAvailable / required); Enabled tells whether a collection records them;
//     NoPreImageError / NoPostImageError are MongoDB's errors for "required" without one.
//   - Remover is the per-node background job that deletes expired pre-images: those older
//     than the oldest oplog entry (their entry is gone, no stream can reach them), those whose
//     operationTime is expireAfterSeconds old when the changeStreamOptions cluster parameter
//     sets preAndPostImages.expireAfterSeconds, and those of collections that no longer exist.
//
// # Known deviations
//
//   - The pre-images collection is clustered in the catalog's sense (an integer record store
//     with a unique _id index), not a record store keyed by _id; removal scans it whole rather
//     than seeking per nsUUID, and uses no truncate markers.
//   - Pre-image writes take no lock on config.system.preimages (MongoDB takes MODE_IX).
//   - A standalone records no pre-images (as MongoDB: it has no oplog time to stamp them).
package images
