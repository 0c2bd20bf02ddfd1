package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// buildTimeout bounds one `go build` (a cold build of humongod with Pebble takes a minute on a
// small machine; a cached one under a second).
const buildTimeout = 5 * time.Minute

var (
	buildMu    sync.Mutex
	buildDir   string              // cache directory for this process's source hash
	builtNames = map[string]bool{} // binaries built (or found) in buildDir by this process
)

// BuildBinaries builds humongo/cmd/<name> for each name into one directory and returns it.
// Within a process each binary is built once. Across processes (go test runs packages in
// parallel) the directory is shared: it lives under os.TempDir, keyed by a hash of the
// module's Go sources and the toolchain settings, so an unchanged tree reuses the binaries
// and a changed one gets fresh ones. Builds write to a temporary name and rename, so
// concurrent builders never expose a half-written binary.
func BuildBinaries(ctx context.Context, names ...string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir == "" {
		dir, err := cacheDir(ctx)
		if err != nil {
			return "", err
		}
		buildDir = dir
	}
	for _, name := range names {
		if builtNames[name] {
			continue
		}
		if err := buildOne(ctx, buildDir, name); err != nil {
			return "", err
		}
		builtNames[name] = true
	}
	return buildDir, nil
}

// MustBuild is BuildBinaries for tests: it fails the test on error.
func MustBuild(t testing.TB, names ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	dir, err := BuildBinaries(ctx, names...)
	if err != nil {
		t.Fatalf("build %v: %v", names, err)
	}
	return dir
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}

// goOutput runs the go command and returns its trimmed stdout.
func goOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// moduleDir locates the humongo module from the current directory (a test runs in its
// package's directory, inside the module).
func moduleDir(ctx context.Context) (string, error) {
	dir, err := goOutput(ctx, "", "list", "-m", "-f", "{{.Dir}}")
	if err != nil {
		return "", err
	}
	if dir == "" || strings.Contains(dir, "\n") {
		return "", fmt.Errorf("go list -m: unexpected module directory %q (run inside the humongo module)", dir)
	}
	return dir, nil
}

// cacheDir returns os.TempDir()/humongo-bin-<uid>/<hash> for the module's current sources.
func cacheDir(ctx context.Context) (string, error) {
	mod, err := moduleDir(ctx)
	if err != nil {
		return "", err
	}
	env, err := goOutput(ctx, mod, "env", "GOVERSION", "GOOS", "GOARCH", "GOFLAGS", "CGO_ENABLED", "GOEXPERIMENT")
	if err != nil {
		return "", err
	}
	h := sha256.New()
	io.WriteString(h, env)
	err = filepath.WalkDir(mod, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != mod && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		// Test files do not go into binaries; skipping them keeps the cache warm while tests
		// are edited.
		if !(strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) && name != "go.mod" && name != "go.sum" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(mod, path)
		fmt.Fprintf(h, "%s %d\n", rel, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash module sources: %w", err)
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("humongo-bin-%d", os.Getuid()), hex.EncodeToString(h.Sum(nil))[:16])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	pruneOldBuilds(filepath.Dir(dir), dir)
	return dir, nil
}

// pruneOldBuilds removes cache directories of other source versions not used for a day, so
// the cache does not grow without bound during development.
func pruneOldBuilds(root, keep string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if p == keep || !e.IsDir() {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 24*time.Hour {
			_ = os.RemoveAll(p)
		}
	}
}

func buildOne(ctx context.Context, dir, name string) error {
	if strings.ContainsAny(name, `/\.`) || name == "" {
		return fmt.Errorf("invalid binary name %q", name)
	}
	dst := filepath.Join(dir, name)
	if _, err := os.Stat(dst); err == nil {
		now := time.Now()
		_ = os.Chtimes(dir, now, now) // mark the directory as in use for pruning
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	mod, err := moduleDir(ctx)
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp-%d", dst, os.Getpid())
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", tmp, "humongo/cmd/"+name)
	cmd.Dir = mod
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("go build humongo/cmd/%s: %w\n%s", name, err, out)
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}
