package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"

	"humongo/internal/mongoerr"
)

// Limits, as advertised by MongoDB 7.0's hello and enforced by mongod.
const (
	// HeaderLen is the size of the standard message header.
	HeaderLen = 16
	// MaxMessageSizeBytes bounds a whole message, compressed or not (hello.maxMessageSizeBytes).
	MaxMessageSizeBytes = 48_000_000
	// MaxBSONObjectSize bounds user documents (hello.maxBsonObjectSize). This package does not
	// enforce it on document-sequence entries: commands do, so that an oversized document
	// yields a per-document writeError (BSONObjectTooLarge) as in MongoDB, not a failed batch.
	MaxBSONObjectSize = 16 * 1024 * 1024
	// MaxBSONInternalSize bounds any document on the wire (MongoDB's BSONObjMaxInternalSize):
	// command bodies may exceed MaxBSONObjectSize by 16 KiB to carry a maximal user document.
	MaxBSONInternalSize = MaxBSONObjectSize + 16*1024
	// MaxWriteBatchSize is hello.maxWriteBatchSize, kept here beside the other wire limits.
	MaxWriteBatchSize = 100_000
)

// OpCode is a wire protocol opcode; the driver's type, so its String method names it.
type OpCode = wiremessage.OpCode

// Opcodes a MongoDB 7.0 server recognises.
const (
	OpReply       = wiremessage.OpReply
	OpUpdate      = wiremessage.OpUpdate
	OpInsert      = wiremessage.OpInsert
	OpQuery       = wiremessage.OpQuery
	OpGetMore     = wiremessage.OpGetMore
	OpDelete      = wiremessage.OpDelete
	OpKillCursors = wiremessage.OpKillCursors
	OpCompressed  = wiremessage.OpCompressed
	OpMsg         = wiremessage.OpMsg
)

// OP_MSG flag bits. Bits 0-15 are "required": a receiver must reject a message with a required
// bit it does not know. Bits 16-31 are optional and ignored when unknown.
const (
	FlagChecksumPresent uint32 = 1 << 0
	FlagMoreToCome      uint32 = 1 << 1
	FlagExhaustAllowed  uint32 = 1 << 16

	knownRequiredFlags = FlagChecksumPresent | FlagMoreToCome
	requiredFlagsMask  = 0xFFFF
)

// OP_REPLY responseFlags bits.
const (
	ReplyCursorNotFound   int32 = 1 << 0
	ReplyQueryFailure     int32 = 1 << 1
	ReplyShardConfigStale int32 = 1 << 2
	ReplyAwaitCapable     int32 = 1 << 3
)

// Header is the standard header that starts every message.
type Header struct {
	MessageLength int32
	RequestID     int32
	ResponseTo    int32
	OpCode        OpCode
}

// ErrFraming marks errors after which the byte stream is out of sync (or the connection
// failed): the caller must close the connection. Test with errors.Is.
var ErrFraming = errors.New("wire framing error")

// framingErr returns a ProtocolError that also matches ErrFraming.
func framingErr(format string, args ...any) error {
	return &mongoerr.Error{Code: mongoerr.ProtocolError, Msg: fmt.Sprintf(format, args...), Err: ErrFraming}
}

// LegacyOpcodeError reports a message with an opcode MongoDB removed in 5.1 (OP_INSERT,
// OP_UPDATE, OP_DELETE, OP_GET_MORE, OP_KILL_CURSORS). The message was consumed, so the
// server may log it and continue; OP_GET_MORE expects an OP_REPLY, the others no reply.
type LegacyOpcodeError struct {
	OpCode OpCode
}

func (e *LegacyOpcodeError) Error() string {
	return e.OpCode.String() + " is no longer supported. The client driver may require an upgrade."
}

// Unwrap gives the MongoDB error to send back when the opcode has a reply (OP_GET_MORE).
func (e *LegacyOpcodeError) Unwrap() error {
	return mongoerr.New(mongoerr.UnsupportedOpQueryCommand, e.Error())
}

// ParseHeader decodes and validates a header. Errors are framing errors: a length outside
// [HeaderLen, MaxMessageSizeBytes] means the stream cannot be resynchronised.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, framingErr("message header is %d bytes, need %d", len(b), HeaderLen)
	}
	h := Header{
		MessageLength: int32(binary.LittleEndian.Uint32(b)),
		RequestID:     int32(binary.LittleEndian.Uint32(b[4:])),
		ResponseTo:    int32(binary.LittleEndian.Uint32(b[8:])),
		OpCode:        OpCode(int32(binary.LittleEndian.Uint32(b[12:]))),
	}
	if h.MessageLength < HeaderLen || h.MessageLength > MaxMessageSizeBytes {
		return h, framingErr("recv(): message msgLen %d is invalid. Min %d Max: %d",
			h.MessageLength, HeaderLen, MaxMessageSizeBytes)
	}
	return h, nil
}

// Message is one parsed request. Documents alias the buffer the message was parsed from
// (for a Reader: until the next ReadMessage). A Message is reused across parses to avoid
// allocation; Parse resets every field.
type Message struct {
	// Header is the header as received (for OP_COMPRESSED: the envelope's header, whose
	// RequestID the reply's responseTo must name).
	Header Header
	// OpCode is the effective opcode: Header.OpCode, or the original opcode of a compressed
	// message.
	OpCode OpCode
	// Compressor is the compressor the message arrived with, CompressorNone if uncompressed.
	// MongoDB answers a compressed request with a reply compressed the same way.
	Compressor Compressor
	// Msg is the parsed OP_MSG when OpCode == OpMsg.
	Msg Msg
	// Query is the parsed OP_QUERY when OpCode == OpQuery.
	Query Query

	// dbuf holds the decompressed payload of an OP_COMPRESSED message, reused across parses.
	dbuf []byte
	// synth is the header MongoDB reconstructs for a decompressed message (length and opcode
	// of the original); an OP_MSG checksum inside OP_COMPRESSED covers it.
	synth [HeaderLen]byte
	// probe is scratch for checking that a zlib stream ends where it should.
	probe [1]byte
}

// reset clears m for a new parse, keeping allocated capacity.
func (m *Message) reset() {
	m.Header = Header{}
	m.OpCode = 0
	m.Compressor = CompressorNone
	m.Msg.reset()
	m.Query = Query{}
	if cap(m.dbuf) > keepBufferCap {
		m.dbuf = nil
	}
}

// dropLarge forgets buffers grown for a large message (Reader.Release): the decompression
// buffer and the parsed sections, which alias the message.
func (m *Message) dropLarge() {
	if cap(m.dbuf) > keepBufferCap {
		m.dbuf = nil
	}
	if int(m.Header.MessageLength) > keepBufferCap {
		m.Msg.reset()
		m.Query = Query{}
	}
}

// Parse parses one whole message held in b (header included), decompressing OP_COMPRESSED.
// Documents in m alias b (or, when compressed, a buffer m owns) until the next Parse. It is
// the in-memory core of Reader.ReadMessage.
func (m *Message) Parse(b []byte) error {
	m.reset()
	h, err := ParseHeader(b)
	m.Header = h
	if err != nil {
		return err
	}
	if int(h.MessageLength) != len(b) {
		return framingErr("message length %d does not match the %d bytes given", h.MessageLength, len(b))
	}
	m.OpCode = h.OpCode
	hdr, body := b[:HeaderLen], b[HeaderLen:]
	if h.OpCode == OpCompressed {
		op, c, raw, err := m.decompress(body)
		m.Compressor = c
		if err != nil {
			return err
		}
		m.OpCode, body = op, raw
		binary.LittleEndian.PutUint32(m.synth[0:], uint32(HeaderLen+len(raw)))
		binary.LittleEndian.PutUint32(m.synth[4:], uint32(h.RequestID))
		binary.LittleEndian.PutUint32(m.synth[8:], uint32(h.ResponseTo))
		binary.LittleEndian.PutUint32(m.synth[12:], uint32(op))
		hdr = m.synth[:]
	}
	return m.parseBody(m.OpCode, hdr, body)
}

// parseBody parses an uncompressed message body (after the header) of opcode op.
func (m *Message) parseBody(op OpCode, hdr, body []byte) error {
	switch op {
	case OpMsg:
		return m.Msg.parse(hdr, body)
	case OpQuery:
		return m.Query.parse(body)
	case OpInsert, OpUpdate, OpDelete, OpGetMore, OpKillCursors:
		return &LegacyOpcodeError{OpCode: op}
	case OpCompressed:
		return mongoerr.New(mongoerr.ProtocolError, "OP_COMPRESSED message contains another OP_COMPRESSED message")
	case OpReply:
		return mongoerr.New(mongoerr.ProtocolError, "OP_REPLY is a reply opcode and cannot be sent to a server")
	default:
		return mongoerr.Newf(mongoerr.ProtocolError, "Unknown op code %d", int32(op))
	}
}
