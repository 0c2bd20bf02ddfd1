package cluster

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"time"
)

// sysProcAttr makes the kernel SIGKILL the child if the test binary dies (a panic, a -timeout
// abort, a CI runner killing the job) before cleanups could run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits, bounded, until /proc reports pid in the stopped state ('T'), so a test
// that pauses a process and immediately sends a request knows the request meets a frozen
// process. Signal delivery is asynchronous, and there is no blocking way to observe it without
// consuming wait status that exec.Cmd.Wait owns; this poll runs at most timeout.
func waitStopped(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	path := fmt.Sprintf("/proc/%d/stat", pid)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// Format: pid (comm) state ...; comm may contain spaces or parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d not stopped after %v", pid, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}
