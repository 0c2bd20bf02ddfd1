package wire

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"

	"humongo/internal/mongoerr"
)

var allCompressors = []Compressor{CompressorNoop, CompressorSnappy, CompressorZlib, CompressorZstd}

// compressedEnvelope wraps a payload in an OP_COMPRESSED with arbitrary declared fields.
func compressedEnvelope(op OpCode, size int32, id byte, data []byte) []byte {
	b := appendHeader(nil, 77, 0, OpCompressed)
	b = binary.LittleEndian.AppendUint32(b, uint32(op))
	b = binary.LittleEndian.AppendUint32(b, uint32(size))
	b = append(b, id)
	b = append(b, data...)
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

func TestCompressedRoundTrip(t *testing.T) {
	body := mustDoc(t, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "t"}, {Key: "pad", Value: strings.Repeat("abc", 1000)}})
	seqDoc := mustDoc(t, bson.D{{Key: "_id", Value: 1}})
	plain := (&Msg{Flags: FlagChecksumPresent, Body: body, Sequences: []Sequence{{Identifier: "documents", Docs: []bsoncore.Document{seqDoc}}}}).Append(nil, 77, 0) // 77: compressedEnvelope's requestID, which the checksum covers
	for _, c := range allCompressors {
		t.Run(c.String(), func(t *testing.T) {
			b, err := AppendCompressed(nil, plain, c)
			if err != nil {
				t.Fatal(err)
			}
			if c != CompressorNoop && len(b) >= len(plain) {
				t.Fatalf("%s did not compress: %d >= %d", c, len(b), len(plain))
			}
			m, err := parse(b)
			if err != nil {
				t.Fatal(err)
			}
			if m.Header.OpCode != OpCompressed || m.OpCode != OpMsg || m.Compressor != c || m.Header.RequestID != 77 {
				t.Fatalf("header %+v opcode %v compressor %v", m.Header, m.OpCode, m.Compressor)
			}
			// The checksum inside verified against the reconstructed header; the body matches.
			equalDocs(t, "body", m.Msg.Body, body)
			equalDocs(t, "sequence doc", m.Msg.Sequences[0].Docs[0], seqDoc)

			// The driver decompresses ours...
			_, _, _, _, rem, _ := wiremessage.ReadHeader(b)
			op, rem, _ := wiremessage.ReadCompressedOriginalOpCode(rem)
			size, rem, _ := wiremessage.ReadCompressedUncompressedSize(rem)
			id, rem, _ := wiremessage.ReadCompressedCompressorID(rem)
			out, err := driver.DecompressPayload(rem, driver.CompressionOpts{Compressor: id, UncompressedSize: size})
			if err != nil || op != wiremessage.OpMsg || id != c.ID() || !bytes.Equal(out, plain[HeaderLen:]) {
				t.Fatalf("driver decompress: %v (op %v id %v)", err, op, id)
			}
			// ...and we decompress the driver's.
			dc, err := driver.CompressPayload(plain[HeaderLen:], driver.CompressionOpts{Compressor: c.ID(), ZlibLevel: wiremessage.DefaultZlibLevel, ZstdLevel: wiremessage.DefaultZstdLevel})
			if err != nil {
				t.Fatal(err)
			}
			m2, err := parse(compressedEnvelope(OpMsg, int32(len(plain)-HeaderLen), byte(c.ID()), dc))
			if err != nil {
				t.Fatal(err)
			}
			equalDocs(t, "driver-compressed body", m2.Msg.Body, body)
		})
	}
	if got, _ := AppendCompressed([]byte("x"), plain, CompressorNone); !bytes.Equal(got[1:], plain) {
		t.Fatal("CompressorNone must copy the message")
	}
	if _, err := AppendCompressed(nil, plain[:10], CompressorSnappy); err == nil {
		t.Fatal("compressing a truncated message must fail")
	}
}

// TestCompressedMalformed covers lies in the envelope, including decompression bombs: a
// payload that expands beyond its declared size or beyond the message limit.
func TestCompressedMalformed(t *testing.T) {
	body := mustDoc(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	payload := AppendMsg(nil, 1, 0, 0, body)[HeaderLen:]
	n := int32(len(payload))
	zlibOf := func(p []byte) []byte {
		var buf bytes.Buffer
		w, _ := zlib.NewWriterLevel(&buf, zlib.BestSpeed)
		w.Write(p)
		w.Close()
		return buf.Bytes()
	}
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest))
	defer enc.Close()
	// 49 MB (more than any message may hold) of zeros after a valid payload: it compresses
	// to a few KB. Compressed once per codec; under -race this is the slow part.
	bomb := make([]byte, 49<<20)
	copy(bomb, payload)
	zstdOf := func(p []byte) []byte { return enc.EncodeAll(p, nil) }
	zlibBomb, zstdBomb := zlibOf(bomb), enc.EncodeAll(bomb, nil)

	var streamed bytes.Buffer // a zstd frame without a content size, as a streaming encoder writes
	sw, _ := zstd.NewWriter(&streamed, zstd.WithEncoderConcurrency(1))
	sw.Write(bomb)
	sw.Close()

	cases := []struct {
		name string
		msg  []byte
	}{
		{"zstd bomb without content size", compressedEnvelope(OpMsg, n, 3, streamed.Bytes())},
		{"too short", withLen(compressedEnvelope(OpMsg, n, 1, nil)[:HeaderLen+5], HeaderLen+5)},
		{"unknown compressor", compressedEnvelope(OpMsg, n, 9, payload)},
		{"negative size", compressedEnvelope(OpMsg, -1, 0, payload)},
		{"size above max", compressedEnvelope(OpMsg, MaxMessageSizeBytes, 1, snappy.Encode(nil, payload))},
		{"nested OP_COMPRESSED", compressedEnvelope(OpCompressed, n, 0, payload)},
		{"noop size lie", compressedEnvelope(OpMsg, n+1, 0, payload)},
		{"snappy size lie", compressedEnvelope(OpMsg, n-1, 1, snappy.Encode(nil, payload))},
		{"snappy garbage", compressedEnvelope(OpMsg, n, 1, []byte{byte(n), 0xff, 0xff, 0xff})},
		{"zlib size lie short", compressedEnvelope(OpMsg, n+1, 2, zlibOf(payload))},
		{"zlib size lie long", compressedEnvelope(OpMsg, n-1, 2, zlibOf(payload))},
		{"zlib garbage", compressedEnvelope(OpMsg, n, 2, []byte{1, 2, 3, 4})},
		{"zstd size lie", compressedEnvelope(OpMsg, n-1, 3, enc.EncodeAll(payload, nil))},
		{"zstd empty", compressedEnvelope(OpMsg, 0, 3, zstdOf(nil))},
		{"zlib empty", compressedEnvelope(OpMsg, 0, 2, zlibOf(nil))},
		{"zstd garbage", compressedEnvelope(OpMsg, n, 3, []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0})},
		{"zlib bomb", compressedEnvelope(OpMsg, n, 2, zlibBomb)},
		{"zstd bomb", compressedEnvelope(OpMsg, n, 3, zstdBomb)},
		{"snappy bomb", compressedEnvelope(OpMsg, n, 1, snappy.Encode(nil, bomb))},
		// A payload declared (legally) at the maximum may cost that much before it proves to
		// be longer: the bound is the declared size, as in mongod.
		{"zlib bomb declared big", compressedEnvelope(OpMsg, MaxMessageSizeBytes-HeaderLen, 2, zlibBomb)},
		{"zstd bomb declared big", compressedEnvelope(OpMsg, MaxMessageSizeBytes-HeaderLen, 3, zstdBomb)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			m, err := parse(c.msg)
			runtime.ReadMemStats(&after)
			// Bombs expand to 49 MB; what we may spend is bounded by the declared size and
			// the codecs' fixed state (zstd's decoder, zlib's window), not by the expansion.
			budget := uint64(8 << 20)
			if strings.HasSuffix(c.name, "declared big") {
				// Growth by doubling up to the declared size: under 2.5 times that in total.
				budget += 5 * MaxMessageSizeBytes / 2
			}
			if spent := after.TotalAlloc - before.TotalAlloc; spent > budget {
				t.Fatalf("parsing allocated %d bytes", spent)
			}
			wantCode(t, err, mongoerr.ProtocolError)
			if isFraming(err) {
				t.Fatalf("a bad OP_COMPRESSED is a per-message error: %v", err)
			}
			if cap(m.dbuf) > MaxMessageSizeBytes {
				t.Fatalf("allocated %d bytes for decompression", cap(m.dbuf))
			}
		})
	}
}

func TestNegotiate(t *testing.T) {
	got := Negotiate([]string{"zlib", "bogus", "snappy", "zlib", "noop"}, DefaultCompressors)
	if want := []Compressor{CompressorZlib, CompressorSnappy}; !equalCompressors(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	if got := Negotiate([]string{"noop", "zstd"}, []Compressor{CompressorNoop}); !equalCompressors(got, []Compressor{CompressorNoop}) {
		t.Fatalf("got %v", got)
	}
	if got := Negotiate(nil, DefaultCompressors); len(got) != 0 {
		t.Fatalf("got %v", got)
	}
	if got := CompressorNames([]Compressor{CompressorZstd, CompressorSnappy}); strings.Join(got, ",") != "zstd,snappy" {
		t.Fatalf("got %v", got)
	}
	for _, c := range allCompressors {
		if back, ok := CompressorByName(c.String()); !ok || back != c {
			t.Fatalf("name round trip of %v", c)
		}
		if back, ok := compressorByID(byte(c.ID())); !ok || back != c {
			t.Fatalf("id round trip of %v", c)
		}
	}

	hello := mustDoc(t, bson.D{{Key: "hello", Value: 1}, {Key: "compression", Value: bson.A{"zstd", "zlib"}}})
	cs, err := NegotiateHello(hello, DefaultCompressors)
	if err != nil || !equalCompressors(cs, []Compressor{CompressorZstd, CompressorZlib}) {
		t.Fatalf("%v %v", cs, err)
	}
	if cs, err := NegotiateHello(mustDoc(t, bson.D{{Key: "hello", Value: 1}}), DefaultCompressors); cs != nil || err != nil {
		t.Fatalf("%v %v", cs, err)
	}
	_, err = NegotiateHello(mustDoc(t, bson.D{{Key: "compression", Value: "zstd"}}), DefaultCompressors)
	wantCode(t, err, mongoerr.BadValue)
	_, err = NegotiateHello(mustDoc(t, bson.D{{Key: "compression", Value: bson.A{1}}}), DefaultCompressors)
	wantCode(t, err, mongoerr.BadValue)
}

func equalCompressors(a, b []Compressor) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
