package storage

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPebbleOnlyInStorage enforces the layering rule: no package outside internal/storage
// imports Pebble (STYLE.md, habit 5).
func TestPebbleOnlyInStorage(t *testing.T) {
	root, err := filepath.Abs("../..")
	must(t, err)
	self, err := filepath.Abs(".")
	must(t, err)
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if path == self {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return nil // a file mid-edit by someone else is not this test's concern
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "github.com/cockroachdb/pebble") {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports %s; only internal/storage may", rel, p)
			}
		}
		return nil
	})
	must(t, err)
}
