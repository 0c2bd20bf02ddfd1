package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"humongo/internal/mongoerr"
)

// lockFileName is the dbpath lock, named as mongod names it: it holds an exclusive flock while a
// humongod uses the directory, and the pid of that process for humans.
const lockFileName = "mongod.lock"

// dbLock is the held lock file. Close releases it and empties the file, which, as in mongod,
// records a clean shutdown.
type dbLock struct{ f *os.File }

// lockDBPath creates dbpath if missing and takes its lock. Another process holding it gives a
// DBPathInUse error.
func lockDBPath(dbpath string) (*dbLock, error) {
	if err := os.MkdirAll(dbpath, 0o750); err != nil {
		return nil, mongoerr.Newf(mongoerr.NonExistentPath, "Data directory %s not found and could not be created: %w", dbpath, err)
	}
	path := filepath.Join(dbpath, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.DBPathInUse, "Unable to create/open the lock file: %s (%w)", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, mongoerr.Newf(mongoerr.DBPathInUse,
				"Unable to lock the lock file: %s (Resource temporarily unavailable). Another humongod instance is already running on the %s directory", path, dbpath)
		}
		return nil, mongoerr.Newf(mongoerr.DBPathInUse, "Unable to lock the lock file: %s (%w)", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("writing the lock file %s: %w", path, err)
		}
	}
	return &dbLock{f: f}, nil
}

// Close empties and unlocks the lock file.
func (l *dbLock) Close() error {
	err := l.f.Truncate(0)
	if serr := l.f.Sync(); err == nil {
		err = serr
	}
	if cerr := l.f.Close(); err == nil { // closing the descriptor drops the flock
		err = cerr
	}
	return err
}
