//go:build !linux

package cluster

import (
	"syscall"
	"time"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// waitStopped cannot observe the stop without /proc; signal delivery is prompt in practice.
func waitStopped(pid int, timeout time.Duration) error { return nil }
