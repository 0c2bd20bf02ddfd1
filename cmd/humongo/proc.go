package main

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// processRunning reports whether pid is a live (not zombie) process that is p's: its command
// line names p's dbpath or port. The check guards `down` against signalling an unrelated process
// that reused a recorded pid after a reboot or crash.
func processRunning(p *Process) bool {
	if p.Pid <= 0 {
		return false
	}
	if err := syscall.Kill(p.Pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if stat, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/stat"); err == nil {
		// Field 3, after the parenthesised command name, is the state; Z is a zombie: exited.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return false
		}
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/cmdline")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) // no /proc to ask: trust kill(0)
	}
	args := bytes.Split(cmdline, []byte{0})
	for i, a := range args {
		if p.DBPath != "" && string(a) == p.DBPath {
			return true
		}
		if string(a) == "--port" && i+1 < len(args) && string(args[i+1]) == strconv.Itoa(p.Port) {
			return true
		}
	}
	return false
}

// waitExit waits up to timeout for pid to exit, which `down` cannot learn through wait(2): the
// process is not its child. A pidfd becomes readable when the process terminates, so this
// blocks in poll(2) instead of polling; kernels without pidfd_open (before 5.3) fall back to
// checking every 20 ms.
func waitExit(p *Process, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	fd, err := unix.PidfdOpen(p.Pid, 0)
	if err == nil {
		defer unix.Close(fd)
		for {
			left := time.Until(deadline)
			if left <= 0 {
				return !processRunning(p)
			}
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
			if err == nil && n > 0 {
				return true
			}
			if err != nil && !errors.Is(err, unix.EINTR) {
				break // fall back to checking
			}
		}
	}
	if errors.Is(err, unix.ESRCH) {
		return true // already gone
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for processRunning(p) {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}
