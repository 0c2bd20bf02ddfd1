package integration

import "syscall"

// procAttr kills the server if the test binary dies, so a crashed test run leaks no process.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
