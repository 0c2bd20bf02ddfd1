package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// stateFileName is the file `up` writes in --dir and `status`/`down` read.
const stateFileName = "humongo.json"

// stateVersion is bumped when the state file's meaning changes incompatibly.
const stateVersion = 1

// State describes a deployment: what `up` started, so that `status` and `down` need no flags
// but --dir. Paths are absolute.
type State struct {
	Version   int       `json:"version"`
	Topology  string    `json:"topology"` // standalone | replset | sharded
	Dir       string    `json:"dir"`
	Processes []Process `json:"processes"`
}

// Process is one started process. Pid is 0 once the process has been stopped by `down`.
type Process struct {
	Name    string   `json:"name"`
	Role    string   `json:"role"` // standalone | member | shard | config | router
	ReplSet string   `json:"replSet,omitempty"`
	Host    string   `json:"host"`
	Port    int      `json:"port"`
	Pid     int      `json:"pid"`
	DBPath  string   `json:"dbpath,omitempty"`
	LogPath string   `json:"logpath"`
	Binary  string   `json:"binary"`
	Args    []string `json:"args"`
	// TLSCAFile is the CA file that verifies the process's certificate when it serves TLS
	// only (up --tls); humongo's own connections to it name it.
	TLSCAFile string `json:"tlsCAFile,omitempty"`
	// KeyFile is the deployment's keyfile when it runs with authorization (up --auth):
	// humongo connects to the process as the internal user with it.
	KeyFile string `json:"keyFile,omitempty"`
}

func (p *Process) addr() string { return fmt.Sprintf("%s:%d", p.Host, p.Port) }

func statePath(dir string) string { return filepath.Join(dir, stateFileName) }

// errNoState means no deployment was ever started in the directory.
var errNoState = errors.New("no deployment")

func readState(dir string) (*State, error) {
	data, err := os.ReadFile(statePath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s (no %s; start one with `humongo up --dir %s`)", errNoState, dir, stateFileName, dir)
	}
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("reading %s: %w", statePath(dir), err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("%s has version %d; this humongo understands version %d", statePath(dir), st.Version, stateVersion)
	}
	return &st, nil
}

// writeState replaces the state file atomically (write, fsync, rename), so a crash of humongo
// never leaves a half-written file that would make the processes unmanageable.
func writeState(st *State) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(st.Dir) + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err = f.Write(append(data, '\n')); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	return os.Rename(tmp, statePath(st.Dir))
}
