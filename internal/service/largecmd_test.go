package service

import (
	"testing"

	"humongo/internal/wire"
)

// keepCmd's no-copy rule holds only for buffers the wire layer never reuses.
func TestLargeCommandBytesIsWires(t *testing.T) {
	if LargeCommandBytes != wire.LargeMessageBytes {
		t.Fatalf("LargeCommandBytes %d, wire.LargeMessageBytes %d", LargeCommandBytes, wire.LargeMessageBytes)
	}
}
