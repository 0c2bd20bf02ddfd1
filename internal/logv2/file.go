package logv2

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"humongo/internal/mongoerr"
)

// File is a log file that can be rotated (MongoDB's systemLog.path with systemLog.logRotate):
// "rename" moves the current file aside to <path>.<YYYY-MM-DDTHH-mm-ss> (UTC) and opens a new
// one; "reopen" closes and reopens the same path, for an outside tool such as logrotate that
// has moved it (mongod requires systemLog.logAppend for it). Safe for concurrent use.
type File struct {
	mu     sync.Mutex
	path   string
	rename bool
	f      *os.File
}

// RotateSuffix is the suffix rotation gives the file it moves aside at t: MongoDB's
// terseCurrentTimeForFilename, in UTC.
func RotateSuffix(t time.Time) string { return "." + t.UTC().Format("2006-01-02T15-04-05") }

// OpenFile opens the log file at path, creating its directory. Without appendMode an
// existing file is first renamed aside with RotateSuffix, as mongod does at startup without
// --logappend. renameOnRotate chooses what Rotate does (true: rename, false: reopen).
func OpenFile(path string, appendMode, renameOnRotate bool) (*File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("logpath %s: %w", path, err)
	}
	if !appendMode {
		if _, err := os.Stat(path); err == nil {
			_ = os.Rename(path, path+RotateSuffix(time.Now()))
		}
	}
	lf := &File{path: path, rename: renameOnRotate}
	if err := lf.open(); err != nil {
		return nil, fmt.Errorf("Can't initialize rotatable log file: %w", err)
	}
	return lf, nil
}

func (lf *File) open() error {
	f, err := os.OpenFile(lf.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	lf.f = f
	return nil
}

// Path is the file's path.
func (lf *File) Path() string { return lf.path }

// Write implements io.Writer.
func (lf *File) Write(p []byte) (int, error) {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.f == nil {
		return 0, os.ErrClosed
	}
	return lf.f.Write(p)
}

// Close closes the file.
func (lf *File) Close() error {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.f == nil {
		return nil
	}
	err := lf.f.Close()
	lf.f = nil
	return err
}

// Rotate renames the file to path+suffix and opens a new one, or reopens it (see File). On a
// failure to open the new file, the old one stays in use.
func (lf *File) Rotate(suffix string) error {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.rename {
		target := lf.path + suffix
		if _, err := os.Stat(target); err == nil {
			return mongoerr.Newf(mongoerr.FileRenameFailed, "Renaming file %s to %s failed; destination already exists",
				lf.path, target)
		}
		if err := os.Rename(lf.path, target); err != nil && !errors.Is(err, os.ErrNotExist) {
			return mongoerr.Newf(mongoerr.FileRenameFailed, "Failed to rename %s to %s: %v", lf.path, target, err)
		}
	}
	old := lf.f
	if err := lf.open(); err != nil {
		lf.f = old
		return mongoerr.Newf(mongoerr.FileNotOpen, "Failed to open %s: %v", lf.path, err)
	}
	if old != nil {
		_ = old.Close()
	}
	return nil
}

// ServerLogType is the log type of the server log, the one {logRotate: "server"} names
// (MongoDB also has "audit", which Humongo does not write).
const ServerLogType = "server"

// Rotate rotates the server log as the logRotate command and SIGUSR1 do: logType "" means
// every log, ServerLogType the server log; any other is NoSuchKey. A server logging to
// standard output has nothing to rotate and succeeds. It logs "Log rotation initiated" (id
// 23166) first, into the old file.
func (s *Sink) Rotate(logType string) error {
	suffix := RotateSuffix(time.Now())
	log := slog.New(&Handler{sink: s, level: slog.LevelInfo, comp: Control, id: 23166, ctx: "main"})
	var lt any
	if logType != "" {
		lt = logType
	}
	log.Info("Log rotation initiated", "suffix", suffix, "logType", lt)
	if logType != "" && logType != ServerLogType {
		log.Warn("Unknown log type for rotate", ID(int(mongoerr.NoSuchKey)), "logType", logType)
		return mongoerr.New(mongoerr.NoSuchKey, "Unknown log type for rotate")
	}
	s.mu.Lock()
	f, ok := s.w.(*File)
	s.mu.Unlock()
	if !ok {
		return nil
	}
	if err := f.Rotate(suffix); err != nil {
		log.Warn("Log rotation failed", ID(23168), "reason", err.Error(), "logType", ServerLogType)
		return err
	}
	if after := s.afterRotate.Load(); after != nil {
		(*after)()
	}
	return nil
}
