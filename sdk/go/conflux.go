// Package conflux is the Go binding of the Conflux SDK (sdk/include/conflux.h): formats
// from Go structs, persistent pipes (the π-channel calls) and ECho-style event channels,
// over libconflux through cgo.
//
//	space, _ := conflux.OpenSpace("tcp://space:7400", nil)
//	f, _ := conflux.FormatOf[Sample]("sample")
//	w, _ := space.Create("results", false)
//	conflux.WriteEvents(w, f, samples)              // one segment
//	w.Close()
//	r, _ := space.Attach("results")
//	for { got, err := conflux.ReadEvents[Sample](r, f, -1); if err == io.EOF { break } ... }
//
// Modes: libconflux goes through the pod's sidecar when CONFLUX_SOCKET is set, and runs
// inside this process otherwise (sdk/README.md, "Mode"); the calls are the same.
//
// Linking: through pkg-config (conflux.pc of an installed SDK, `make -C sdk install`; the
// SDK's Makefile points PKG_CONFIG_PATH at the install it stages in sdk/build/stage), which
// gives the headers and the shared library with an rpath to it, so the library's own
// dependencies (DPDK, UCX, OpenSSL) come with it.
//
// Errors are *Error values carrying the errno and the library's message (cx_errmsg);
// errors.Is(err, syscall.EBUSY) works. The end of a pipe is io.EOF.
package conflux

/*
#cgo pkg-config: conflux
#include <stdlib.h>
#include "conflux.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"syscall"
)

// Version is the version of the library this program runs with ("0.1.0").
func Version() string { return C.GoString(C.conflux_version()) }

// Header version numbers.
const (
	VersionMajor = int(C.CONFLUX_VERSION_MAJOR)
	VersionMinor = int(C.CONFLUX_VERSION_MINOR)
	VersionPatch = int(C.CONFLUX_VERSION_PATCH)
)

// Error is a failed libconflux call: the call, its errno and the library's message.
type Error struct {
	Op    string
	Errno syscall.Errno
	Msg   string
}

func (e *Error) Error() string {
	if e.Op == "" {
		return e.Msg
	}
	return e.Op + ": " + e.Msg
}

// Unwrap gives the errno, so errors.Is(err, syscall.ETIMEDOUT) holds.
func (e *Error) Unwrap() error { return e.Errno }

// libError builds the Error of a call that just failed with errno on this OS thread (the
// caller holds runtime.LockOSThread so that cx_errmsg is this call's message).
func libError(op string, errno syscall.Errno) error {
	msg := C.GoString(C.cx_errmsg())
	if msg == "" {
		msg = errno.Error()
	}
	if len(msg) > 3 && msg[:3] == "pi_" { // the library named the call already
		op = ""
	}
	return &Error{Op: op, Errno: errno, Msg: msg}
}

// check turns a 0-or-negative-errno result into an error (thread locked by the caller).
func check(rc C.int, op string) error {
	if rc >= 0 {
		return nil
	}
	return libError(op, syscall.Errno(-rc))
}

// errnoOf is the errno cgo captured for a pi_* call that returned -1.
func errnoOf(err error) syscall.Errno {
	if e, ok := err.(syscall.Errno); ok && e != 0 {
		return e
	}
	return syscall.EIO
}

// lock pins the goroutine to its OS thread for a call and the reading of its message.
func lock() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

func usageError(op, format string, a ...any) error {
	return &Error{Op: op, Errno: syscall.EINVAL, Msg: fmt.Sprintf(format, a...)}
}
