package cluster

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The harness runs every process with internal authentication, as production clusters run:
// a keyfile shared by the test binary's processes (so authorization is on, members
// authenticate to each other as the internal user) and clients that authenticate as that
// user too, so every command of every fault test passes the authentication and authorization
// path. HUMONGO_TEST_NOAUTH=1 runs them without (to tell an auth problem from another).

var harnessKey struct {
	once      sync.Once
	path, key string
	err       error
}

// AuthOn reports whether the harness runs deployments with a keyfile.
func AuthOn() bool { return os.Getenv("HUMONGO_TEST_NOAUTH") == "" }

// Keyfile returns the harness's keyfile and its key, written once per test binary (owner-only,
// as humongod requires) into the temporary directory, and removed by RemoveKeyfile.
func Keyfile() (path, key string, err error) {
	harnessKey.once.Do(func() {
		raw := make([]byte, 96)
		if _, err := rand.Read(raw); err != nil {
			harnessKey.err = err
			return
		}
		dir, err := os.MkdirTemp("", "humongo-cluster-key-")
		if err != nil {
			harnessKey.err = err
			return
		}
		harnessKey.key = base64.StdEncoding.EncodeToString(raw)
		harnessKey.path = filepath.Join(dir, "keyfile")
		harnessKey.err = os.WriteFile(harnessKey.path, []byte(harnessKey.key+"\n"), 0o600)
	})
	return harnessKey.path, harnessKey.key, harnessKey.err
}

// RemoveKeyfile removes the harness's keyfile (TestMain, after the tests).
func RemoveKeyfile() {
	if harnessKey.path != "" {
		_ = os.RemoveAll(filepath.Dir(harnessKey.path))
	}
}

// withKeyfile adds --keyFile to a process's arguments unless the harness runs without
// authentication or the test gave its own.
func withKeyfile(args []string) ([]string, error) {
	if !AuthOn() || slices.Contains(args, "--keyFile") {
		return args, nil
	}
	path, _, err := Keyfile()
	if err != nil {
		return nil, err
	}
	return append(args, "--keyFile", path), nil
}

// InternalCredential is the internal user's credential for the harness's keyfile.
func InternalCredential() (options.Credential, bool) {
	if !AuthOn() {
		return options.Credential{}, false
	}
	_, key, err := Keyfile()
	if err != nil {
		return options.Credential{}, false
	}
	return options.Credential{AuthMechanism: "SCRAM-SHA-256", AuthSource: "local", Username: "__system", Password: key}, true
}

// withInternalAuth makes a harness client authenticate as the internal user.
func withInternalAuth(o *options.ClientOptions) *options.ClientOptions {
	if c, ok := InternalCredential(); ok {
		o.SetAuth(c)
	}
	return o
}

// RunTests runs a package's tests and removes the harness's keyfile after them: the TestMain
// of every package that starts harness processes (os.Exit(cluster.RunTests(m))).
func RunTests(m interface{ Run() int }) int {
	code := m.Run()
	RemoveKeyfile()
	return code
}
