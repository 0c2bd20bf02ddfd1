package router

import (
	"os"
	"testing"

	harness "humongo/internal/cluster"
)

// TestMain removes the cluster harness's keyfile after the tests (its processes run with it).
func TestMain(m *testing.M) { os.Exit(harness.RunTests(m)) }
