// Package wire is Humongo's MongoDB wire protocol framing layer: it turns bytes from a client
// connection into parsed requests and replies into bytes. It owns nothing above framing: no
// command semantics, no dispatch, no error-to-reply conversion (that is internal/server).
//
// Scope (MongoDB 7.0, maxWireVersion 21; the spec has no wire section, so MongoDB's
// OpMsg::parse / Message / MessageCompressorManager behaviour is the reference):
//
//   - OP_MSG (2013): flag bits, one kind-0 body section, kind-1 document sequences, optional
//     CRC-32C checksum. Msg.Command merges sequences into the body the way MongoDB's
//     OpMsgRequest does, so command handlers see `documents` / `updates` / `deletes` arrays
//     whether the client used sequences or not.
//   - OP_QUERY (2004), legacy, only for commands on `<db>.$cmd`: drivers (and pymongo) send the
//     first hello this way. Query.Command unwraps `$query`/`query` and `$readPreference`.
//   - OP_REPLY (1): built to answer OP_QUERY commands.
//   - OP_COMPRESSED (2012): noop, snappy, zlib and zstd; decompression is bounded by the declared
//     size, which is itself bounded by MaxMessageSizeBytes (no decompression bombs).
//   - OP_INSERT/OP_UPDATE/OP_DELETE/OP_GET_MORE/OP_KILL_CURSORS: removed in MongoDB 5.1; they are
//     recognised and reported as *LegacyOpcodeError so the server can log and answer or close.
//
// Errors. Every error this package returns for bad input is a *mongoerr.Error with a
// MongoDB-like code and message (ProtocolError, InvalidBSON, BSONObjectTooLarge,
// IllegalOpMsgFlag, ChecksumMismatch, ...). Two classes matter to the caller:
//
//   - framing errors (bad messageLength, short read, I/O): the byte stream is out of sync and
//     the connection must be closed. errors.Is(err, ErrFraming) reports them; io.EOF is returned
//     unwrapped when the peer closed cleanly between messages.
//   - message errors (bad flags, bad BSON, bad checksum, ...): the whole message was consumed,
//     Message.Header is valid, and the server may answer with an error reply and continue, as
//     mongod does for a malformed OP_MSG.
//
// Memory. Reader reuses one buffer across messages; parsed documents alias it and are valid
// only until the next ReadMessage. Parsing a small OP_MSG into a reused Message does not
// allocate. A large message (over LargeMessageBytes) first passes the Reader's Gate (the
// server's in-flight byte budget), gets a buffer of its exact size that is never reused, and
// Release drops it and gives the admission back. Nothing here panics on client bytes;
// FuzzReadMessage checks that.
package wire
