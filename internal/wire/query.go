package wire

import (
	"encoding/binary"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// OP_QUERY flag bits (the ones a command can carry meaningfully).
const (
	QuerySecondaryOK int32 = 1 << 2
	QueryExhaust     int32 = 1 << 6
)

// Query is a parsed OP_QUERY. MongoDB 7.0 accepts it only for commands on `<db>.$cmd`
// (in practice the handshake hello/isMaster); see UnsupportedOpQuery.
type Query struct {
	Flags              int32
	FullCollectionName string
	NumberToSkip       int32
	NumberToReturn     int32
	// Query is the query document: for a command, the command (possibly wrapped, see Command).
	Query bsoncore.Document
	// ReturnFieldsSelector is the optional projection, nil when absent.
	ReturnFieldsSelector bsoncore.Document
}

// parse parses an OP_QUERY body (after the header).
func (q *Query) parse(b []byte) error {
	if len(b) < 4 {
		return mongoerr.New(mongoerr.ProtocolError, "Invalid OP_QUERY: message is too short")
	}
	q.Flags = int32(binary.LittleEndian.Uint32(b))
	b = b[4:]
	k := indexNUL(b)
	if k < 0 {
		return mongoerr.New(mongoerr.ProtocolError, "Invalid OP_QUERY: fullCollectionName is not NUL-terminated")
	}
	q.FullCollectionName = internNamespace(b[:k])
	b = b[k+1:]
	if len(b) < 8 {
		return mongoerr.New(mongoerr.ProtocolError, "Invalid OP_QUERY: message is too short")
	}
	q.NumberToSkip = int32(binary.LittleEndian.Uint32(b))
	q.NumberToReturn = int32(binary.LittleEndian.Uint32(b[4:]))
	b = b[8:]
	n, err := readDocLen(b, MaxBSONInternalSize, "OP_QUERY query")
	if err != nil {
		return err
	}
	if err := ValidateBSON(b[:n]); err != nil {
		return err
	}
	q.Query, b = b[:n], b[n:]
	if len(b) > 0 {
		n, err := readDocLen(b, MaxBSONInternalSize, "OP_QUERY returnFieldsSelector")
		if err != nil {
			return err
		}
		if err := ValidateBSON(b[:n]); err != nil {
			return err
		}
		q.ReturnFieldsSelector, b = b[:n], b[n:]
	}
	if len(b) > 0 {
		return mongoerr.Newf(mongoerr.ProtocolError, "Invalid OP_QUERY: %d unexpected bytes after the documents", len(b))
	}
	return nil
}

// internNamespace avoids an allocation for the namespace every handshake uses.
func internNamespace(ns []byte) string {
	if string(ns) == "admin.$cmd" {
		return "admin.$cmd"
	}
	return string(ns)
}

// Database returns the database part of FullCollectionName (before the first dot).
func (q *Query) Database() string {
	db, _, _ := strings.Cut(q.FullCollectionName, ".")
	return db
}

// IsCommand reports whether the query targets a command namespace `<db>.$cmd`.
func (q *Query) IsCommand() bool {
	db, coll, ok := strings.Cut(q.FullCollectionName, ".")
	return ok && db != "" && coll == "$cmd"
}

// Command returns the command an OP_QUERY on `<db>.$cmd` carries, upconverted the way
// MongoDB's rpc::upconvertRequest does for its command dispatcher:
//   - a query whose first field is `$query` or `query` (a document) is a wrapper: the command
//     is that document and `$readPreference` is taken from the wrapper;
//   - otherwise `$readPreference` may sit in the command itself; if there is none and the
//     SecondaryOK flag is set, {mode: "secondaryPreferred"} is implied;
//   - `$db` is appended from the namespace; a client-supplied `$db` is an error.
//
// The result is a new document; OP_QUERY is rare enough that the copy does not matter.
func (q *Query) Command() (bsoncore.Document, error) {
	if !q.IsCommand() {
		return nil, mongoerr.Newf(mongoerr.UnsupportedOpQueryCommand,
			"OP_QUERY is no longer supported for queries (namespace %s). The client driver may require an upgrade.", q.FullCollectionName)
	}
	cmd := q.Query
	var readPref bsoncore.Value
	if first, err := cmd.IndexErr(0); err == nil {
		if key := first.Key(); key == "$query" || key == "query" {
			inner, ok := first.Value().DocumentOK()
			if !ok {
				return nil, mongoerr.Newf(mongoerr.TypeMismatch, "OP_QUERY %s wrapper must be an object", key)
			}
			if rp, err := cmd.LookupErr("$readPreference"); err == nil {
				readPref = rp
			}
			cmd = inner
		}
	}
	if readPref.Type == 0 {
		if rp, err := cmd.LookupErr("$readPreference"); err == nil {
			readPref = rp
		}
	}
	elems, err := cmd.Elements()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid OP_QUERY command: %v", err)
	}
	if len(elems) == 0 {
		return nil, mongoerr.New(mongoerr.FailedToParse, "OP_QUERY command document is empty")
	}
	out := bsoncore.NewDocumentBuilder()
	for _, e := range elems {
		switch e.Key() {
		case "$db":
			return nil, mongoerr.New(mongoerr.InvalidOptions, "$db is not allowed in OP_QUERY requests")
		case "$readPreference":
			// Re-added below, once, whichever place it came from.
			continue
		}
		out.AppendValue(e.Key(), e.Value())
	}
	switch {
	case readPref.Type != 0:
		out.AppendValue("$readPreference", readPref)
	case q.Flags&QuerySecondaryOK != 0:
		out.AppendDocument("$readPreference", bsoncore.NewDocumentBuilder().AppendString("mode", "secondaryPreferred").Build())
	}
	out.AppendString("$db", q.Database())
	return out.Build(), nil
}

// UnsupportedOpQuery is the error MongoDB 5.1+ returns for an OP_QUERY command other than
// the handshake (hello, isMaster, ismaster): the server decides which names it allows.
func UnsupportedOpQuery(command string) error {
	return mongoerr.Newf(mongoerr.UnsupportedOpQueryCommand,
		"Unsupported OP_QUERY command: %s. The client driver may require an upgrade. For more details see https://dochub.mongodb.org/core/legacy-opcode-removal", command)
}

// Reply is a parsed OP_REPLY (for tests and for anything speaking to a legacy server).
type Reply struct {
	ResponseFlags  int32
	CursorID       int64
	StartingFrom   int32
	NumberReturned int32
	Documents      []bsoncore.Document
}

// AppendReply appends an OP_REPLY answering an OP_QUERY command: cursorID 0, startingFrom 0,
// numberReturned 1, and doc as the only document.
func AppendReply(dst []byte, requestID, responseTo int32, responseFlags int32, doc bsoncore.Document) []byte {
	start := len(dst)
	dst = appendHeader(dst, requestID, responseTo, OpReply)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(responseFlags))
	dst = binary.LittleEndian.AppendUint64(dst, 0) // cursorID
	dst = binary.LittleEndian.AppendUint32(dst, 0) // startingFrom
	dst = binary.LittleEndian.AppendUint32(dst, 1) // numberReturned
	dst = append(dst, doc...)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}

// ParseReply parses a whole OP_REPLY message (header included).
func ParseReply(b []byte) (Header, Reply, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, Reply{}, err
	}
	if int(h.MessageLength) != len(b) {
		return h, Reply{}, framingErr("message length %d does not match the %d bytes given", h.MessageLength, len(b))
	}
	if h.OpCode != OpReply {
		return h, Reply{}, mongoerr.Newf(mongoerr.ProtocolError, "expected OP_REPLY, got %v", h.OpCode)
	}
	b = b[HeaderLen:]
	if len(b) < 20 {
		return h, Reply{}, mongoerr.New(mongoerr.ProtocolError, "Invalid OP_REPLY: message is too short")
	}
	r := Reply{
		ResponseFlags:  int32(binary.LittleEndian.Uint32(b)),
		CursorID:       int64(binary.LittleEndian.Uint64(b[4:])),
		StartingFrom:   int32(binary.LittleEndian.Uint32(b[12:])),
		NumberReturned: int32(binary.LittleEndian.Uint32(b[16:])),
	}
	b = b[20:]
	for len(b) > 0 {
		n, err := readDocLen(b, MaxBSONInternalSize, "OP_REPLY document")
		if err != nil {
			return h, r, err
		}
		if err := ValidateBSON(b[:n]); err != nil {
			return h, r, err
		}
		r.Documents = append(r.Documents, b[:n])
		b = b[n:]
	}
	if int(r.NumberReturned) != len(r.Documents) {
		return h, r, mongoerr.Newf(mongoerr.ProtocolError,
			"Invalid OP_REPLY: numberReturned is %d but %d documents follow", r.NumberReturned, len(r.Documents))
	}
	return h, r, nil
}
