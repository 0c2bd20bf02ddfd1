package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"github.com/klauspost/compress/zlib"
	"io"
	"sync"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"

	"humongo/internal/mongoerr"
)

// Compressor names how a message is (or is to be) compressed. Its zero value,
// CompressorNone, means "not compressed", so a zero Message or option never compresses by
// accident; the wire IDs are given by ID.
type Compressor uint8

const (
	CompressorNone   Compressor = iota // not an OP_COMPRESSED message
	CompressorNoop                     // OP_COMPRESSED with compressorId 0 (tests only in MongoDB)
	CompressorSnappy                   // compressorId 1, snappy block format
	CompressorZlib                     // compressorId 2, zlib stream
	CompressorZstd                     // compressorId 3, zstd frame
)

// DefaultCompressors is mongod's default net.compression.compressors: snappy,zstd,zlib.
var DefaultCompressors = []Compressor{CompressorSnappy, CompressorZstd, CompressorZlib}

// ID returns the compressorId sent on the wire. It must not be called on CompressorNone.
func (c Compressor) ID() wiremessage.CompressorID { return wiremessage.CompressorID(c - 1) }

// String returns the name used in hello.compression ("" for CompressorNone).
func (c Compressor) String() string {
	switch c {
	case CompressorNoop:
		return "noop"
	case CompressorSnappy:
		return "snappy"
	case CompressorZlib:
		return "zlib"
	case CompressorZstd:
		return "zstd"
	}
	return ""
}

// CompressorByName maps a hello.compression name to a Compressor.
func CompressorByName(name string) (Compressor, bool) {
	switch name {
	case "noop":
		return CompressorNoop, true
	case "snappy":
		return CompressorSnappy, true
	case "zlib":
		return CompressorZlib, true
	case "zstd":
		return CompressorZstd, true
	}
	return CompressorNone, false
}

// compressorByID maps a wire compressorId to a Compressor.
func compressorByID(id byte) (Compressor, bool) {
	if id > 3 {
		return CompressorNone, false
	}
	return Compressor(id + 1), true
}

// Negotiate returns the compressors both sides support, in the client's order (MongoDB's
// MessageCompressorManager::serverNegotiate). Unknown names and duplicates are skipped. The
// hello reply lists the result's names in `compression`, omitting the field when it is empty.
func Negotiate(client []string, enabled []Compressor) []Compressor {
	var out []Compressor
	for _, name := range client {
		c, ok := CompressorByName(name)
		if !ok || !containsCompressor(enabled, c) || containsCompressor(out, c) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// NegotiateHello applies Negotiate to the `compression` field of a hello/isMaster command.
// A missing field yields nil; a field that is not an array of strings is a BadValue, as in
// MongoDB.
func NegotiateHello(hello bsoncore.Document, enabled []Compressor) ([]Compressor, error) {
	v, err := hello.LookupErr("compression")
	if err != nil {
		return nil, nil
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "'compression' is not an array")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid 'compression' array: %v", err)
	}
	names := make([]string, 0, len(vals))
	for _, v := range vals {
		s, ok := v.StringValueOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.BadValue, "'compression' is not an array of strings")
		}
		names = append(names, s)
	}
	return Negotiate(names, enabled), nil
}

// CompressorNames returns the names of cs, for the hello reply.
func CompressorNames(cs []Compressor) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}

func containsCompressor(cs []Compressor, c Compressor) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

// The codecs are shared by all connections. zstd's EncodeAll/DecodeAll are safe for
// concurrent use and run on the calling goroutine (the concurrency options only size the
// pool of codec states, GOMAXPROCS by default); zlib state is pooled.
var (
	zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(wiremessage.DefaultZstdLevel)))
	})
	zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(0),
			// Bound the output by cap(dst), which is the declared uncompressedSize, and the
			// window by the largest legal message, so a hostile frame cannot make us
			// allocate more than the message may hold.
			zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxMemory(MaxMessageSizeBytes),
			zstd.WithDecoderMaxWindow(1<<26))
	})
	zlibWriters sync.Pool // *zlib.Writer
	zlibReaders sync.Pool // io.ReadCloser implementing zlib.Resetter
)

// AppendCompressed appends msg (one whole uncompressed message, header included) wrapped in
// an OP_COMPRESSED with compressor c; the envelope keeps msg's requestID and responseTo.
// CompressorNone appends msg unchanged.
func AppendCompressed(dst, msg []byte, c Compressor) ([]byte, error) {
	if c == CompressorNone {
		return append(dst, msg...), nil
	}
	h, err := ParseHeader(msg)
	if err != nil {
		return dst, err
	}
	if int(h.MessageLength) != len(msg) {
		return dst, mongoerr.Newf(mongoerr.ProtocolError, "message length %d does not match the %d bytes given", h.MessageLength, len(msg))
	}
	if h.OpCode == OpCompressed {
		return dst, mongoerr.New(mongoerr.ProtocolError, "cannot compress an OP_COMPRESSED message")
	}
	payload := msg[HeaderLen:]
	start := len(dst)
	dst = appendHeader(dst, h.RequestID, h.ResponseTo, OpCompressed)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(h.OpCode))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = append(dst, byte(c.ID()))
	switch c {
	case CompressorNoop:
		dst = append(dst, payload...)
	case CompressorSnappy:
		n := len(dst)
		dst = growLen(dst, snappy.MaxEncodedLen(len(payload)))
		enc := snappy.Encode(dst[n:], payload)
		dst = dst[:n+len(enc)]
	case CompressorZlib:
		buf := appendBuffer{b: dst}
		zw, _ := zlibWriters.Get().(*zlib.Writer)
		if zw == nil {
			zw, err = zlib.NewWriterLevel(&buf, wiremessage.DefaultZlibLevel)
			if err != nil {
				return dst[:start], err
			}
		} else {
			zw.Reset(&buf)
		}
		_, err = zw.Write(payload)
		if err == nil {
			err = zw.Close()
		}
		zw.Reset(nil)
		zlibWriters.Put(zw)
		if err != nil {
			return dst[:start], err
		}
		dst = buf.b
	case CompressorZstd:
		enc, err := zstdEncoder()
		if err != nil {
			return dst[:start], err
		}
		dst = enc.EncodeAll(payload, dst)
	default:
		return dst[:start], mongoerr.Newf(mongoerr.BadValue, "unknown compressor %d", c)
	}
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst, nil
}

// decompress decodes an OP_COMPRESSED body (after the header) into m.dbuf and returns the
// original opcode, the compressor and the original message body (after its header).
func (m *Message) decompress(body []byte) (OpCode, Compressor, []byte, error) {
	if len(body) < 9 {
		return 0, CompressorNone, nil, mongoerr.New(mongoerr.ProtocolError, "Invalid OP_COMPRESSED: message is too short")
	}
	op := OpCode(int32(binary.LittleEndian.Uint32(body)))
	size := int(int32(binary.LittleEndian.Uint32(body[4:])))
	c, ok := compressorByID(body[8])
	data := body[9:]
	if !ok {
		return 0, CompressorNone, nil, mongoerr.Newf(mongoerr.ProtocolError,
			"Compression algorithm specified in message is not available: %d", body[8])
	}
	// The decompressed message gets a 16-byte header; both must fit the message limit. This
	// is the bomb check: nothing is allocated beyond a size the client declared and the
	// limit allows.
	if size < 0 || size > MaxMessageSizeBytes-HeaderLen {
		return 0, c, nil, mongoerr.Newf(mongoerr.ProtocolError,
			"Decompressed message would be %d bytes, which is larger than the maximum of %d", size, MaxMessageSizeBytes)
	}
	if op == OpCompressed {
		return 0, c, nil, mongoerr.New(mongoerr.ProtocolError, "OP_COMPRESSED message contains another OP_COMPRESSED message")
	}
	exact := true
	// Check what can be checked before allocating, so the allocation is proportional to
	// the bytes received even when the declared size is a lie.
	switch c {
	case CompressorNoop:
		if len(data) != size {
			return 0, c, nil, errDecompress(c, errSizeMismatch)
		}
	case CompressorSnappy:
		n, err := snappy.DecodedLen(data)
		if err == nil && n != size {
			err = errSizeMismatch
		}
		if err != nil {
			return 0, c, nil, errDecompress(c, err)
		}
	case CompressorZlib:
		// DEFLATE cannot expand more than 1032:1.
		if size > 1032*len(data)+64 {
			return 0, c, nil, errDecompress(c, errSizeMismatch)
		}
	case CompressorZstd:
		// Every zstd encoder drivers use writes the frame content size; check it. Frames
		// without it are bounded by zstd's maximal ratio (an RLE block: 128 KiB from 4 bytes).
		var zh zstd.Header
		if err := zh.Decode(data); err != nil {
			return 0, c, nil, errDecompress(c, err)
		}
		if zh.HasFCS && zh.FrameContentSize != uint64(size) || !zh.HasFCS && size > (1<<15)*len(data) {
			return 0, c, nil, errDecompress(c, errSizeMismatch)
		}
		exact = zh.HasFCS
	}
	var out []byte
	var err error
	m.dbuf = m.dbuf[:0] // nothing to preserve from the previous message when growing
	switch c {
	case CompressorNoop:
		out = m.outBuf(size, size)
		copy(out, data)
	case CompressorSnappy:
		out = m.outBuf(size, size)
		var dec []byte
		dec, err = snappy.Decode(out, data)
		if err == nil && len(dec) != size {
			err = errSizeMismatch
		}
	case CompressorZlib:
		out, err = m.inflateZlib(data, size)
	case CompressorZstd:
		out, err = m.decodeZstd(data, size, exact)
	}
	if err != nil {
		return 0, c, nil, errDecompress(c, err)
	}
	return op, c, out, nil
}

// outBuf returns m.dbuf resized to n bytes with capacity at least capacity, preserving its
// contents (for growth during decompression).
func (m *Message) outBuf(n, capacity int) []byte {
	if cap(m.dbuf) < capacity {
		nb := make([]byte, len(m.dbuf), capacity)
		copy(nb, m.dbuf)
		m.dbuf = nb
	}
	m.dbuf = m.dbuf[:n]
	return m.dbuf
}

// growStart is the first output buffer for payloads whose size cannot be verified before
// decoding: the declared size, if small, or a multiple of the input, growing by doubling.
// Memory then follows what the payload really expands to, not what the header claims.
func growStart(size, in int) int { return min(size, max(64<<10, 8*in)) }

// inflateZlib decompresses data, which must expand to exactly size bytes, into m.dbuf.
func (m *Message) inflateZlib(data []byte, size int) ([]byte, error) {
	src := bytes.NewReader(data)
	var zr io.ReadCloser
	if r, _ := zlibReaders.Get().(io.ReadCloser); r != nil {
		if err := r.(zlib.Resetter).Reset(src, nil); err != nil {
			zlibReaders.Put(r)
			return nil, err
		}
		zr = r
	} else {
		r, err := zlib.NewReader(src)
		if err != nil {
			return nil, err
		}
		zr = r
	}
	defer zlibReaders.Put(zr)
	m.dbuf = m.dbuf[:0]
	out := m.outBuf(0, growStart(size, len(data)))
	for len(out) < size {
		if len(out) == cap(out) {
			out = m.outBuf(len(out), min(size, 2*cap(out)))
		}
		end := min(size, cap(out))
		if _, err := io.ReadFull(zr, out[len(out):end]); err != nil {
			return nil, err
		}
		out = out[:end]
		m.dbuf = out
	}
	// The stream must end exactly here (and its checksum must verify). The probe byte
	// lives in m so the interface call does not allocate it.
	if n, err := zr.Read(m.probe[:]); n != 0 || err != io.EOF {
		if err != nil && err != io.EOF {
			return nil, err
		}
		return nil, errSizeMismatch
	}
	return out, nil
}

// decodeZstd decompresses data, which must expand to exactly size bytes, into m.dbuf. With
// exact (the frame declared its content size, already checked) one buffer of size is used;
// otherwise decoding is retried with a doubling output bound.
func (m *Message) decodeZstd(data []byte, size int, exact bool) ([]byte, error) {
	dec, err := zstdDecoder()
	if err != nil {
		return nil, err
	}
	bound := size
	if !exact {
		bound = growStart(size, len(data))
	}
	for {
		out := m.outBuf(0, bound)[:0:bound]
		got, err := dec.DecodeAll(data, out)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) && bound < size {
			bound = min(size, 2*bound)
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(got) != size {
			return nil, errSizeMismatch
		}
		if size > 0 && &got[0] != &out[:1][0] {
			// Cannot happen with the cap limit; keep the result in m.dbuf regardless.
			copy(m.outBuf(size, size), got)
		}
		m.dbuf = m.dbuf[:size]
		return m.dbuf, nil
	}
}

func errDecompress(c Compressor, err error) error {
	return mongoerr.Newf(mongoerr.ProtocolError, "Could not decompress %s message: %v", c, err)
}

// errSizeMismatch reports a payload whose decompressed size differs from the declared one.
var errSizeMismatch = errors.New("decompressed size does not match uncompressedSize")

// growLen extends b by n bytes (contents unspecified), reallocating if needed.
func growLen(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// appendBuffer is an io.Writer appending to a byte slice.
type appendBuffer struct{ b []byte }

func (w *appendBuffer) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
