package conflux_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A real space server (confluxd --role=space) on a free loopback port for the whole test
// binary, in a temporary directory removed at the end.
var spaceAddr string

func confluxd() string {
	if p := os.Getenv("CONFLUXD"); p != "" {
		return p
	}
	p, _ := filepath.Abs("../../dataplane/build/bin/confluxd")
	return p
}

func startSpace() (addr string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "cxsdk-go-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(confluxd(), "--role=space", "--dir="+dir, "--listen=tcp://127.0.0.1:0", "--quiet")
	// If this test binary dies (a panicking test skips the cleanup), the kernel stops the
	// server rather than leaving it running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		os.RemoveAll(dir)
	}
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		f := strings.Fields(l) // "listening tcp://IP:PORT udp IP:PORT"
		if len(f) >= 2 && f[0] == "listening" {
			return f[1], stop, nil
		}
		stop()
		return "", nil, fmt.Errorf("confluxd printed %q", l)
	case <-time.After(10 * time.Second):
		stop()
		return "", nil, fmt.Errorf("confluxd did not say it listens within 10 s")
	}
}

func TestMain(m *testing.M) {
	if helper := os.Getenv("CONFLUX_GO_HELPER"); helper != "" {
		os.Exit(runHelper(helper, os.Args[len(os.Args)-3:]))
	}
	stop := func() {}
	if _, err := os.Stat(confluxd()); err == nil {
		var err error
		if spaceAddr, stop, err = startSpace(); err != nil {
			fmt.Fprintln(os.Stderr, "space server:", err)
			os.Exit(1)
		}
	}
	rc := m.Run()
	stop()
	os.Exit(rc)
}

func needSpace(t *testing.T) string {
	t.Helper()
	if spaceAddr == "" {
		t.Skipf("no space server binary at %s: run `make -C dataplane` (or set CONFLUXD)", confluxd())
	}
	return spaceAddr
}

// helperCmd runs this test binary as a helper process (see runHelper in channel_test.go).
func helperCmd(kind string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "CONFLUX_GO_HELPER="+kind)
	cmd.Stderr = os.Stderr
	return cmd
}
