package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADME keeps the README's claims about humongo and the test command checkable: its
// humongo examples parse, the files it names exist in the repository (or it says they are
// outside it), and it names what the e2e stage installs and how.
func TestREADME(t *testing.T) {
	root := filepath.Join("..", "..")
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)

	for _, line := range strings.Split(readme, "\n") {
		rest, ok := strings.CutPrefix(line, "bin/humongo ")
		if !ok {
			continue
		}
		args := strings.Fields(strings.SplitN(rest, "#", 2)[0])
		var err error
		switch args[0] {
		case "up":
			_, err = parseUpFlags(args[1:], &bytes.Buffer{})
		case "bench":
			_, err = parseBenchFlags(args[1:], &bytes.Buffer{})
		case "status", "down":
		default:
			t.Errorf("README runs unknown command %q", line)
		}
		if err != nil {
			t.Errorf("README example %q does not parse: %v", line, err)
		}
	}

	// A path in backquotes: a file the reader is pointed to.
	for _, m := range regexp.MustCompile("`((?:\\.\\./)?[A-Za-z0-9_./-]+\\.(?:md|sh|json|js|py))`").FindAllStringSubmatchIndex(readme, -1) {
		path := readme[m[2]:m[3]]
		if strings.HasPrefix(path, "../") {
			if ctx := readme[max(0, m[0]-200):min(len(readme), m[1]+200)]; !strings.Contains(ctx, "not part of") {
				t.Errorf("README points to %s, outside the repository, without saying so", path)
			}
			continue
		}
		if _, err := os.Stat(filepath.Join(root, path)); err != nil {
			t.Errorf("README names %s, which is not in the repository", path)
		}
	}

	e2e, err := os.ReadFile(filepath.Join(root, "e2e", "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, install := range []string{"npm install", "apt-get install"} {
		if strings.Contains(string(e2e), install) && !strings.Contains(readme, install) {
			t.Errorf("e2e/run.sh runs %q; the README's requirements do not say so", install)
		}
	}
	if strings.Contains(readme, "Nothing else needs to be installed") {
		t.Error("README says nothing else needs to be installed; the e2e stage needs Node.js/npm and apt-get")
	}
}
