package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

const (
	// readBufferSize is the bufio size in front of the connection: most requests arrive in
	// one read syscall, header and body together.
	readBufferSize = 16 << 10
	// keepBufferCap is the largest message buffer a Reader keeps between messages; a bigger
	// one (a 48 MB insert batch) is dropped (Release) so idle connections stay small.
	keepBufferCap = 1 << 20
)

// LargeMessageBytes is the size above which a message is large: its buffers are never reused
// (so what aliases them stays valid after the next read: the server keeps such a command
// without copying it), and it passes the Reader's gate (SetGate) before its body is read.
const LargeMessageBytes = keepBufferCap

// Gate admits a large message of n bytes before its body is read, waiting as long as it
// must; release gives the admission back. An error closes the connection (framing error).
type Gate func(n int) (release func(), err error)

// Reader reads whole messages from a connection, reusing one buffer. Not safe for
// concurrent use; one per connection.
type Reader struct {
	br      *bufio.Reader
	buf     []byte
	gate    Gate
	release func() // the current large message's admission, nil if none
	m       *Message
}

// NewReader returns a Reader for r (normally a net.Conn).
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, readBufferSize), buf: make([]byte, 0, 4<<10)}
}

// SetGate makes the Reader pass every large message through g before reading its body (the
// server's bound on bytes of large messages in flight). Call before the first read.
func (r *Reader) SetGate(g Gate) { r.gate = g }

// Release ends the message last read: it gives back its gate admission and drops buffers
// grown for a large message (the message's documents must no longer be used, except a large
// one's, whose buffer is left to the garbage collector). ReadMessage calls it first; a server
// calls it as soon as it is done with a request, so that a connection idle after a large
// message holds neither memory nor admission.
func (r *Reader) Release() {
	if r.release != nil {
		r.release()
		r.release = nil
	}
	r.ReleaseBuffers()
	r.m = nil
}

// ReleaseBuffers is Release without giving back the gate's admission: a server that copied
// what it needs out of a large message (the merged command) lets the message's own buffers go
// while the command runs.
func (r *Reader) ReleaseBuffers() {
	if cap(r.buf) > keepBufferCap {
		r.buf = make([]byte, 0, 4<<10)
	}
	if r.m != nil {
		r.m.dropLarge()
	}
}

// ReadMessage reads and parses the next message into m. Documents in m alias the Reader's
// buffer until the next call or Release (a large message's, for as long as they are used).
//
// It returns io.EOF, unwrapped, when the peer closed the connection between messages. Errors
// matching ErrFraming (including I/O errors and a gate's refusal) leave the stream unusable:
// close the connection. Other errors are about one message that was read entirely: m.Header
// is valid, and the server can answer it with an error and keep reading.
func (r *Reader) ReadMessage(m *Message) error {
	r.Release()
	hdr := r.buf[:HeaderLen]
	if n, err := io.ReadFull(r.br, hdr); err != nil {
		m.reset()
		if n == 0 && errors.Is(err, io.EOF) {
			return io.EOF
		}
		return framingErr("reading message header: %v", err)
	}
	h, err := ParseHeader(hdr)
	if err != nil {
		m.reset()
		m.Header = h
		return err
	}
	n := int(h.MessageLength)
	if n > LargeMessageBytes && r.gate != nil {
		rel, err := r.gate(n)
		if err != nil {
			m.reset()
			m.Header = h
			return framingErr("admitting a %d-byte message: %v", n, err)
		}
		r.release = rel
	}
	r.m = m
	msg, err := r.readBody(n)
	if err != nil {
		m.reset()
		m.Header = h
		return framingErr("reading %d-byte message body: %v", n-HeaderLen, err)
	}
	// A compressed message is admitted for what it decompresses to (as declared, which
	// decompression then enforces): 1 MB of zstd may carry a 48 MB insert.
	if h.OpCode == OpCompressed && r.gate != nil && len(msg) >= HeaderLen+8 {
		if size := int(int32(binary.LittleEndian.Uint32(msg[HeaderLen+4:]))) + HeaderLen; size > LargeMessageBytes && size > n &&
			size <= MaxMessageSizeBytes {
			if r.release != nil {
				r.release()
				r.release = nil
			}
			rel, err := r.gate(size)
			if err != nil {
				m.reset()
				m.Header = h
				return framingErr("admitting a message of %d bytes decompressed: %v", size, err)
			}
			r.release = rel
		}
	}
	return m.Parse(msg)
}

// readBody reads the rest of an n-byte message whose header is in r.buf[:HeaderLen] and
// returns the whole message. Messages up to keepBufferCap get their buffer at once; a larger
// one first reads keepBufferCap bytes, then gets its exact size: a header that lies about its
// length costs memory only once the peer has sent a megabyte, and an honest 48 MB message
// costs 48 MB (not the 2× of doubling), admitted by the gate before the allocation.
func (r *Reader) readBody(n int) ([]byte, error) {
	buf := r.buf[:HeaderLen]
	for len(buf) < n {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(n, max(cap(buf), keepBufferCap)))
			if cap(buf) >= keepBufferCap {
				nb = make([]byte, len(buf), n)
			}
			copy(nb, buf)
			buf = nb
			r.buf = nb[:0]
		}
		end := min(n, cap(buf))
		if _, err := io.ReadFull(r.br, buf[len(buf):end]); err != nil {
			return nil, err
		}
		buf = buf[:end]
	}
	return buf, nil
}

// Writer writes whole messages to a connection with one Write call each, reusing its
// buffers. Not safe for concurrent use; one per connection.
type Writer struct {
	w    io.Writer
	buf  []byte // the uncompressed message
	cbuf []byte // its OP_COMPRESSED form
}

// NewWriter returns a Writer for w (normally a net.Conn).
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, buf: make([]byte, 0, 4<<10)}
}

// WriteMsg writes an OP_MSG with one body section, compressed with c (CompressorNone: not
// compressed). Pass the request's Message.Compressor to answer as MongoDB does.
func (w *Writer) WriteMsg(requestID, responseTo int32, flags uint32, body bsoncore.Document, c Compressor) error {
	w.buf = AppendMsg(w.buf[:0], requestID, responseTo, flags, body)
	return w.WriteMessage(w.buf, c)
}

// WriteReply writes an OP_REPLY carrying doc (the answer to an OP_QUERY command).
func (w *Writer) WriteReply(requestID, responseTo int32, responseFlags int32, doc bsoncore.Document, c Compressor) error {
	w.buf = AppendReply(w.buf[:0], requestID, responseTo, responseFlags, doc)
	return w.WriteMessage(w.buf, c)
}

// WriteMessage writes msg, one whole uncompressed message, compressing it with c first.
func (w *Writer) WriteMessage(msg []byte, c Compressor) error {
	out := msg
	if c != CompressorNone {
		var err error
		w.cbuf, err = AppendCompressed(w.cbuf[:0], msg, c)
		if err != nil {
			return err
		}
		out = w.cbuf
	}
	_, err := w.w.Write(out)
	w.shrink()
	return err
}

// shrink drops buffers grown by an unusually large reply.
func (w *Writer) shrink() {
	if cap(w.buf) > keepBufferCap {
		w.buf = make([]byte, 0, 4<<10)
	}
	if cap(w.cbuf) > keepBufferCap {
		w.cbuf = nil
	}
}
