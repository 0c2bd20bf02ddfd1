package cluster

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	RemoveKeyfile()
	os.Exit(code)
}
