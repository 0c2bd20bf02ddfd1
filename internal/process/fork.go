package process

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// forkReadyEnv names, in a child started by Fork, the file descriptor of the pipe on which
// it reports readiness.
const forkReadyEnv = "HUMONGO_FORK_READY_FD"

// Forked reports whether this process is the background child of a --fork start.
func Forked() bool { return os.Getenv(forkReadyEnv) != "" }

// Fork is --fork in the parent: as mongod, it starts the server again in the background
// (the same binary and arguments, in a new session so it outlives the terminal), waits until
// the child is ready for connections or has exited, and returns the parent's exit code: 0 once
// the child is ready, the child's exit code if it failed first. It writes mongod's lines to
// stdout.
func Fork(argv []string, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "ERROR: cannot find the executable to fork: %v\n", err)
		return ExitUncaught
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(stderr, "ERROR: cannot create the readiness pipe: %v\n", err)
		return ExitUncaught
	}
	defer r.Close()
	fmt.Fprintln(stdout, "about to fork child process, waiting until server is ready for connections.")
	cmd := exec.Command(exe, argv[1:]...)
	cmd.Env = append(os.Environ(), forkReadyEnv+"=3")
	cmd.ExtraFiles = []*os.File{w} // fd 3 in the child
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	_ = w.Close() // the child holds the only write end: EOF means it is gone
	if err != nil {
		fmt.Fprintf(stderr, "ERROR: fork failed: %v\n", err)
		return ExitUncaught
	}
	fmt.Fprintf(stdout, "forked process: %d\n", cmd.Process.Pid)
	var b [1]byte
	if n, _ := r.Read(b[:]); n == 1 {
		fmt.Fprintln(stdout, "child process started successfully, parent exiting")
		_ = cmd.Process.Release()
		return ExitClean
	}
	code := ExitUncaught
	if err := cmd.Wait(); err == nil {
		code = ExitClean
	} else if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() > 0 {
		code = ee.ExitCode()
	}
	fmt.Fprintf(stdout, "ERROR: child process failed, exited with %d\nTo see additional information in this output, start without the \"--fork\" option.\n", code)
	if code == ExitClean {
		code = ExitUncaught
	}
	return code
}

// NotifyReady tells the parent of a --fork start that the server accepts connections (a
// no-op in a process not started by Fork).
func NotifyReady() {
	v := os.Getenv(forkReadyEnv)
	if v == "" {
		return
	}
	_ = os.Unsetenv(forkReadyEnv)
	fd, err := strconv.Atoi(v)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "fork-ready")
	_, _ = f.Write([]byte{1})
	_ = f.Close()
}
