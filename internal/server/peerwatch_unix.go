//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package server

import "syscall"

// peerClosed waits until the socket is readable (or the wait is cut short by a read
// deadline) and reports whether the peer has closed or reset it. It consumes nothing.
func peerClosed(rc syscall.RawConn) bool {
	var closed bool
	var buf [1]byte
	err := rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EAGAIN || err == syscall.EINTR:
			return false // not readable yet: wait in the poller
		case err != nil:
			closed = true // reset
		case n == 0:
			closed = true // end of file
		}
		return true
	})
	return closed && err == nil
}
