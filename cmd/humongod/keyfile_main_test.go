package main

import (
	"os"
	"testing"

	"humongo/internal/cluster"
)

// TestMain removes the cluster harness's keyfile after the tests (its processes run with it).
func TestMain(m *testing.M) { os.Exit(cluster.RunTests(m)) }
