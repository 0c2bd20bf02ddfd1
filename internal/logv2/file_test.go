package logv2

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"humongo/internal/mongoerr"
)

func TestFileRotateRename(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "mongod.log")
	f, err := OpenFile(path, false, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := NewHandler(f, nil)
	slog.New(h).Info("first")
	h.Sink().SetAfterRotate(func() { slog.New(h).Info("process details") })
	if err := h.Sink().Rotate(""); err != nil {
		t.Fatal(err)
	}
	slog.New(h).Info("second")
	rotated, _ := filepath.Glob(path + ".*")
	if len(rotated) != 1 || !strings.HasPrefix(filepath.Base(rotated[0]), "mongod.log.20") {
		t.Fatalf("rotated %v", rotated)
	}
	old, _ := os.ReadFile(rotated[0])
	cur, _ := os.ReadFile(path)
	if !strings.Contains(string(old), `"msg":"first"`) || strings.Contains(string(cur), "first") ||
		!strings.Contains(string(cur), `"msg":"second"`) || !strings.HasPrefix(string(cur), `{"t"`) ||
		!strings.Contains(strings.SplitN(string(cur), "\n", 2)[0], "process details") {
		t.Errorf("old %s\ncurrent %s", old, cur)
	}
	// A second rotation within the same second would overwrite the first: refused.
	if err := h.Sink().Rotate(ServerLogType); err == nil {
		if rotated, _ := filepath.Glob(path + ".*"); len(rotated) != 2 {
			t.Errorf("second rotation: %v", rotated)
		}
	} else if mongoerr.CodeOf(err) != mongoerr.FileRenameFailed {
		t.Errorf("second rotation: %v", err)
	}
}

// "reopen" reopens the same path, after an outside tool (logrotate) has moved the file.
func TestFileRotateReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mongod.log")
	f, err := OpenFile(path, true, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := NewHandler(f, nil)
	slog.New(h).Info("first")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := h.Sink().Rotate(""); err != nil {
		t.Fatal(err)
	}
	slog.New(h).Info("second")
	moved, _ := os.ReadFile(path + ".1")
	cur, _ := os.ReadFile(path)
	if !strings.Contains(string(moved), "first") || !strings.Contains(string(cur), "second") || strings.Contains(string(cur), "first") {
		t.Errorf("moved %s\ncurrent %s", moved, cur)
	}
	if m, _ := filepath.Glob(path + ".20*"); len(m) != 0 {
		t.Errorf("reopen renamed: %v", m)
	}
}

func TestRotateWithoutFileAndUnknownType(t *testing.T) {
	h := NewHandler(nil, nil)
	if err := h.Sink().Rotate(""); err != nil {
		t.Errorf("stdout: %v", err)
	}
	if err := h.Sink().Rotate("server"); err != nil {
		t.Errorf("stdout, server: %v", err)
	}
	err := h.Sink().Rotate("audit")
	var me *mongoerr.Error
	if !errors.As(err, &me) || mongoerr.CodeOf(err) != mongoerr.NoSuchKey {
		t.Errorf("audit: %v", err)
	}
}
