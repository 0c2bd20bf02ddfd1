package arch

import (
	"os/exec"
	"strings"
	"testing"
)

// rank orders internal packages bottom-up as in ARCHITECTURE.md. A package may import another
// internal package only if that package's rank is strictly lower. Packages of equal rank are
// independent of each other. Subpackages inherit the rank of their nearest listed parent.
var rank = map[string]int{
	"mongoerr":              0,
	"recordid":              0,
	"failpoint":             1,
	"bsonutil":              1,
	"collation":             1, // collations on x/text: sort keys for strings; bsonutil takes it as a StringComparer
	"logv2":                 1,
	"wire":                  2,
	"keystring":             2,
	"storage":               2,
	"lock":                  2,
	"catalog":               3,
	"index":                 5,
	"query":                 6,
	"validate":              6,
	"agg":                   7,
	"cursor":                7, // cursor manager: below commands, independent of the planner
	"opobserver":            4, // the hook interface sits below the write path; implementations (repl/oplog) sit above
	"operation":             8, // the operation context and collection access: below read/write concern (repl) and sessions (txn)
	"vclock":                9,
	"repl":                  9,
	"txn":                   10,
	"primaryonly":           10,
	"sharding":              11,
	"resharding":            12,
	"serverless":            12,
	"router":                13,
	"commands":              14,
	"server":                15,
	"cluster":               16, // test harness: may start any binary
	"crashtest":             16,
	"repl/applier/repltest": 16, // in-process replica sets for tests: starts servers
	"integration":           17, // real-process driver tests; may use the cluster harness
	"bench":                 16, // humongo bench engine: a client of any server
	"arch":                  17,
}

const module = "humongo/"

// internalRank returns the rank of an import path under humongo/internal/, and whether it is one.
func internalRank(t *testing.T, path string) (string, int, bool) {
	rest, ok := strings.CutPrefix(path, module+"internal/")
	if !ok {
		return "", 0, false
	}
	// The longest listed prefix wins, so a harness below a low layer (repl/applier/repltest)
	// can sit with the harnesses.
	top, _, _ := strings.Cut(rest, "/")
	for p := rest; ; {
		if _, ok := rank[p]; ok {
			top = p
			break
		}
		i := strings.LastIndex(p, "/")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	r, ok := rank[top]
	if !ok {
		t.Errorf("internal package %s has no layer in arch.rank: add it (and to ARCHITECTURE.md)", path)
	}
	return top, r, true
}

func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		top, r, internal := internalRank(t, pkg)
		for _, imp := range imports {
			if strings.HasPrefix(imp, "github.com/cockroachdb/pebble") && top != "storage" {
				t.Errorf("%s imports %s: Pebble belongs to internal/storage only", pkg, imp)
			}
			if !internal {
				continue // cmd/* may import anything
			}
			itop, ir, ok := internalRank(t, imp)
			if !ok || itop == top {
				continue
			}
			if ir >= r {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must go downwards", pkg, r, imp, ir)
			}
		}
	}
}
