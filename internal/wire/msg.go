package wire

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// castagnoli is the CRC-32C table OP_MSG checksums use.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Section kinds of an OP_MSG.
const (
	sectionBody     byte = 0
	sectionSequence byte = 1
)

// Sequence is an OP_MSG kind-1 section: a named list of documents that stands for an array
// field of the command (insert's `documents`, update's `updates`, delete's `deletes`, ...).
type Sequence struct {
	Identifier string
	Docs       []bsoncore.Document
}

// Msg is a parsed OP_MSG.
type Msg struct {
	// Flags are the flagBits; see FlagChecksumPresent, FlagMoreToCome, FlagExhaustAllowed.
	Flags uint32
	// Body is the kind-0 section: the command document.
	Body bsoncore.Document
	// Sequences are the kind-1 sections in message order; identifiers are distinct.
	Sequences []Sequence
}

// MoreToCome reports whether the sender expects no reply (fire-and-forget, w:0) or, on a
// reply, will send another one.
func (m *Msg) MoreToCome() bool { return m.Flags&FlagMoreToCome != 0 }

// ExhaustAllowed reports whether the client accepts a moreToCome stream of replies.
func (m *Msg) ExhaustAllowed() bool { return m.Flags&FlagExhaustAllowed != 0 }

// reset empties m for reuse, keeping the capacity of Sequences and of each Docs slice.
func (m *Msg) reset() {
	m.Flags = 0
	m.Body = nil
	for i := range m.Sequences {
		clear(m.Sequences[i].Docs)
		m.Sequences[i].Docs = m.Sequences[i].Docs[:0]
	}
	m.Sequences = m.Sequences[:0]
}

// nextSequence returns a fresh sequence slot, reusing a previous parse's Docs capacity.
func (m *Msg) nextSequence() *Sequence {
	n := len(m.Sequences)
	if n < cap(m.Sequences) {
		m.Sequences = m.Sequences[:n+1]
	} else {
		m.Sequences = append(m.Sequences, Sequence{})
	}
	s := &m.Sequences[n]
	s.Docs = s.Docs[:0]
	return s
}

// parse parses an OP_MSG from the 16 header bytes hdr (needed for the checksum, which
// covers the whole message) and the bytes after it.
func (m *Msg) parse(hdr, body []byte) error {
	if len(body) < 4 {
		return mongoerr.New(mongoerr.ProtocolError, "Invalid OP_MSG: message is too short for flagBits")
	}
	m.Flags = binary.LittleEndian.Uint32(body)
	if illegal := m.Flags & requiredFlagsMask &^ knownRequiredFlags; illegal != 0 {
		return mongoerr.Newf(mongoerr.IllegalOpMsgFlag,
			"Message contains illegal flags value: Flag %032b", illegal)
	}
	sections := body[4:]
	if m.Flags&FlagChecksumPresent != 0 {
		if len(sections) < 4 {
			return mongoerr.New(mongoerr.ProtocolError, "Invalid OP_MSG: checksumPresent is set but the message has no room for a checksum")
		}
		n := len(sections) - 4
		want := binary.LittleEndian.Uint32(sections[n:])
		crc := crc32.Update(0, castagnoli, hdr)
		crc = crc32.Update(crc, castagnoli, body[:4+n])
		if crc != want {
			return mongoerr.New(mongoerr.ChecksumMismatch, "OP_MSG checksum does not match contents")
		}
		sections = sections[:n]
	}
	haveBody := false
	for len(sections) > 0 {
		kind := sections[0]
		sections = sections[1:]
		switch kind {
		case sectionBody:
			if haveBody {
				return mongoerr.New(mongoerr.ProtocolError, "Multiple body sections in message")
			}
			n, err := readDocLen(sections, MaxBSONInternalSize, "OP_MSG body")
			if err != nil {
				return err
			}
			if err := ValidateBSON(sections[:n]); err != nil {
				return err
			}
			m.Body = sections[:n]
			sections = sections[n:]
			haveBody = true
		case sectionSequence:
			n, err := m.parseSequence(sections)
			if err != nil {
				return err
			}
			sections = sections[n:]
		default:
			return mongoerr.Newf(mongoerr.ProtocolError, "Unknown section kind %d", kind)
		}
	}
	if !haveBody {
		return mongoerr.New(mongoerr.ProtocolError, "OP_MSG requests require a body")
	}
	return nil
}

// parseSequence parses one kind-1 section at the start of b (after the kind byte) and
// returns its size.
func (m *Msg) parseSequence(b []byte) (int, error) {
	if len(b) < 4 {
		return 0, mongoerr.New(mongoerr.ProtocolError, "Invalid OP_MSG: document sequence is truncated")
	}
	size := int(int32(binary.LittleEndian.Uint32(b)))
	// The size counts itself and the identifier's NUL at least.
	if size < 5 || size > len(b) {
		return 0, mongoerr.Newf(mongoerr.ProtocolError,
			"Invalid OP_MSG: document sequence size %d does not fit the %d bytes remaining", size, len(b))
	}
	sec := b[4:size]
	k := indexNUL(sec)
	if k < 0 {
		return 0, mongoerr.New(mongoerr.ProtocolError, "Invalid OP_MSG: document sequence identifier is not NUL-terminated")
	}
	id := sec[:k]
	for i := range m.Sequences {
		if m.Sequences[i].Identifier == string(id) {
			return 0, mongoerr.Newf(mongoerr.ProtocolError, "Duplicate document sequence: %s", id)
		}
	}
	s := m.nextSequence()
	s.Identifier = internIdentifier(id)
	docs := sec[k+1:]
	for len(docs) > 0 {
		n, err := readDocLen(docs, MaxBSONInternalSize, "OP_MSG document sequence")
		if err != nil {
			return 0, err
		}
		if err := ValidateBSON(docs[:n]); err != nil {
			return 0, err
		}
		s.Docs = append(s.Docs, docs[:n])
		docs = docs[n:]
	}
	return size, nil
}

// internIdentifier returns id as a string without allocating for the identifiers drivers
// actually send.
func internIdentifier(id []byte) string {
	switch string(id) {
	case "documents":
		return "documents"
	case "updates":
		return "updates"
	case "deletes":
		return "deletes"
	case "ops":
		return "ops"
	case "nsInfo":
		return "nsInfo"
	}
	return string(id)
}

// Command returns the command document a handler sees: the body with each document
// sequence appended as an array field named by its identifier, as MongoDB's OpMsgRequest
// presents it. A sequence whose identifier is also a body field is an error. Without
// sequences the body itself is returned (no copy).
func (m *Msg) Command() (bsoncore.Document, error) {
	if len(m.Sequences) == 0 {
		return m.Body, nil
	}
	out, err := m.AppendCommand(nil)
	return out, err
}

// AppendCommand appends the merged command document (see Command) to dst, so a caller can
// reuse a buffer across requests.
func (m *Msg) AppendCommand(dst []byte) ([]byte, error) {
	if len(m.Body) < 5 {
		return dst, mongoerr.New(mongoerr.ProtocolError, "OP_MSG requests require a body")
	}
	for i := range m.Sequences {
		if _, err := m.Body.LookupErr(m.Sequences[i].Identifier); err == nil {
			return dst, mongoerr.Newf(mongoerr.ProtocolError,
				"Duplicate field between command body and document sequence: %s", m.Sequences[i].Identifier)
		}
	}
	// Size the result first: a 48 MB insert is copied once, not grown by doubling.
	size := len(m.Body)
	for i := range m.Sequences {
		s := &m.Sequences[i]
		size += 1 + len(s.Identifier) + 1 + 4 + 1
		for j, d := range s.Docs {
			size += 1 + decimalLen(j) + 1 + len(d)
		}
	}
	dst = slices.Grow(dst, size)
	start, dst := bsoncore.ReserveLength(dst)
	dst = append(dst, m.Body[4:len(m.Body)-1]...)
	for i := range m.Sequences {
		s := &m.Sequences[i]
		var arr int32
		dst = append(dst, byte(bsoncore.TypeArray))
		dst = append(dst, s.Identifier...)
		dst = append(dst, 0)
		arr, dst = bsoncore.ReserveLength(dst)
		for j, d := range s.Docs {
			dst = append(dst, byte(bsoncore.TypeEmbeddedDocument))
			dst = strconv.AppendInt(dst, int64(j), 10)
			dst = append(dst, 0)
			dst = append(dst, d...)
		}
		dst = append(dst, 0)
		dst = bsoncore.UpdateLength(dst, arr, int32(len(dst[arr:])))
	}
	dst = append(dst, 0)
	dst = bsoncore.UpdateLength(dst, start, int32(len(dst[start:])))
	return dst, nil
}

// decimalLen is the number of digits of j >= 0 (an array index key).
func decimalLen(j int) int {
	n := 1
	for ; j >= 10; j /= 10 {
		n++
	}
	return n
}

// AppendMsg appends an OP_MSG with a single body section. With FlagChecksumPresent in flags
// a CRC-32C checksum is appended.
func AppendMsg(dst []byte, requestID, responseTo int32, flags uint32, body bsoncore.Document) []byte {
	return appendMsg(dst, requestID, responseTo, flags, body, nil)
}

// Append appends m as an OP_MSG (body, then its sequences) with the given header IDs; a
// checksum is appended when m.Flags has FlagChecksumPresent.
func (m *Msg) Append(dst []byte, requestID, responseTo int32) []byte {
	return appendMsg(dst, requestID, responseTo, m.Flags, m.Body, m.Sequences)
}

func appendMsg(dst []byte, requestID, responseTo int32, flags uint32, body bsoncore.Document, seqs []Sequence) []byte {
	start := len(dst)
	dst = appendHeader(dst, requestID, responseTo, OpMsg)
	dst = binary.LittleEndian.AppendUint32(dst, flags)
	dst = append(dst, sectionBody)
	dst = append(dst, body...)
	for i := range seqs {
		dst = append(dst, sectionSequence)
		sz := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		dst = append(dst, seqs[i].Identifier...)
		dst = append(dst, 0)
		for _, d := range seqs[i].Docs {
			dst = append(dst, d...)
		}
		binary.LittleEndian.PutUint32(dst[sz:], uint32(len(dst)-sz))
	}
	if flags&FlagChecksumPresent != 0 {
		// The length must be final before the checksum covers it.
		binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start+4))
		dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	}
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}

// appendHeader appends a header with a zero length, to be patched by the caller.
func appendHeader(dst []byte, requestID, responseTo int32, op OpCode) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(requestID))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(responseTo))
	return binary.LittleEndian.AppendUint32(dst, uint32(op))
}
