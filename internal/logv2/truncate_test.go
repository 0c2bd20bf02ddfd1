package logv2

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// bigInsert is an insert command of n documents, as a slow-op line would log it.
func bigInsert(n int) []byte {
	docs := bsoncore.NewArrayBuilder()
	for i := range n {
		docs.AppendDocument(bsoncore.NewDocumentBuilder().AppendInt32("_id", int32(i)).
			AppendString("s", strings.Repeat("x", 90)).Build())
	}
	return bsoncore.NewDocumentBuilder().AppendString("insert", "c").AppendArray("documents", docs.Build()).
		AppendBoolean("ordered", true).AppendString("$db", "test").Build()
}

func logOne(t *testing.T, h *Handler, args ...any) (string, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	h.sink.w = &buf
	slog.New(h).Info("Slow query", args...)
	line := strings.TrimSuffix(buf.String(), "\n")
	var v map[string]any
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		t.Fatalf("invalid JSON (%v): %.300s", err, line)
	}
	return line, v
}

func TestTruncateLargeBSONAttribute(t *testing.T) {
	h := NewHandler(nil, nil)
	cmd := bigInsert(20000)
	line, v := logOne(t, h, "command", BSON(cmd), "ok", true)
	if len(cmd) < 2<<20 || len(line) > 11*1024 {
		t.Fatalf("command %d bytes logged as a %d-byte line", len(cmd), len(line))
	}
	// The attribute is closed where it was cut and stays an object.
	got := v["attr"].(map[string]any)["command"].(map[string]any)
	if got["insert"] != "c" || len(got["documents"].([]any)) == 0 || got["ordered"] != nil {
		t.Errorf("truncated command %v", got)
	}
	if v["attr"].(map[string]any)["ok"] != true {
		t.Errorf("attributes after the cut one are kept: %v", v["attr"])
	}
	// "truncated" names the path to the element cut, with its type and BSON size.
	tr := v["truncated"].(map[string]any)["command"].(map[string]any)["documents"].(map[string]any)
	if len(tr) != 1 {
		t.Fatalf("truncated %v", v["truncated"])
	}
	n := len(got["documents"].([]any)) - 1 // the last one written is the one cut inside
	for idx, leaf := range tr {
		if idx != itoa(n) && idx != itoa(n+1) {
			t.Errorf("cut at %s, %d documents written", idx, n+1)
		}
		var info map[string]any
		for _, x := range leaf.(map[string]any) {
			info = x.(map[string]any)
		}
		if info["type"] == nil || info["size"] == nil {
			t.Errorf("cut element report %v", leaf)
		}
	}
	if size := v["size"].(map[string]any)["command"]; size != float64(len(cmd)) {
		t.Errorf("size %v, want %d", size, len(cmd))
	}
	if !strings.HasSuffix(line, `"size":{"command":`+itoa(len(cmd))+`}}`) {
		t.Errorf("line ends %s", line[len(line)-80:])
	}
}

func itoa(n int) string { return string(appendInt(nil, int64(n))) }

func TestTruncateLimitFromParameter(t *testing.T) {
	h := NewHandler(nil, nil)
	cmd := bigInsert(2000)
	kb := int64(1)
	h.Sink().SetMaxAttributeSizeKB(func() int64 { return kb })
	line1, _ := logOne(t, h, "command", BSON(cmd))
	kb = 20
	line20, _ := logOne(t, h, "command", BSON(cmd))
	if len(line1) > 1500 || len(line20) < 19*1024 || len(line20) > 21*1024 {
		t.Errorf("1 KB: %d bytes, 20 KB: %d bytes", len(line1), len(line20))
	}
	kb = 0 // no limit
	line0, v := logOne(t, h, "command", BSON(cmd))
	if v["truncated"] != nil || !strings.Contains(line0, `"ordered":true,"$db":"test"}`) {
		t.Errorf("unlimited: %d bytes, truncated %v", len(line0), v["truncated"])
	}
}

func TestTruncateString(t *testing.T) {
	h := NewHandler(nil, nil)
	h.Sink().SetMaxAttributeSizeKB(func() int64 { return 1 })
	s := strings.Repeat("é", 600) + strings.Repeat("\"", 600) // 1200 + 1200 escaped bytes
	_, v := logOne(t, h, "error", s, "short", "ok")
	got := v["attr"].(map[string]any)["error"].(string)
	if len(got) > 1024 || !strings.HasPrefix(s, got) {
		t.Errorf("cut string %d bytes, prefix %v", len(got), strings.HasPrefix(s, got))
	}
	want := map[string]any{"error": map[string]any{"type": "string", "size": float64(2400)}}
	if b1, b2 := mustJSON(v["truncated"]), mustJSON(want); b1 != b2 {
		t.Errorf("truncated %s, want %s", b1, b2)
	}
	if v["size"] != nil {
		t.Errorf("a string has no size entry: %v", v["size"])
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// Below the limit the writer produces what the driver's relaxed Extended JSON does.
func TestBSONAttributeMatchesExtJSON(t *testing.T) {
	doc, err := bson.Marshal(bson.D{{Key: "a", Value: 1.5}, {Key: "b", Value: int64(1) << 40},
		{Key: "c", Value: bson.A{"x\n\"y", nil, true, 3.0}}, {Key: "d", Value: bson.NewObjectID()},
		{Key: "e", Value: bson.DateTime(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli())},
		{Key: "f", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}},
		{Key: "g", Value: bson.Regex{Pattern: "^a", Options: "i"}}, {Key: "h", Value: bson.D{}}})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := bson.MarshalExtJSON(bson.Raw(doc), false, false)
	got, cut := appendDocJSON(nil, doc, false, 0)
	if string(got) != string(want) || cut != nil {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
