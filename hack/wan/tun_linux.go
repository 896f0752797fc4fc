package main

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

const (
	tunSetIff = 0x400454ca // TUNSETIFF
	iffTun    = 0x0001
	iffNoPi   = 0x1000 // packets without the 4-byte protocol header
)

// ifreq is struct ifreq with the flags member of its union (40 bytes on linux/amd64).
type ifreq struct {
	name  [syscall.IFNAMSIZ]byte
	flags uint16
	_     [22]byte
}

// OpenTun creates the tun device name (raw IP packets, no header) and brings it up. The
// device lives as long as the returned file is open: when this process ends, the kernel
// removes it with every route through it.
func OpenTun(name string) (*os.File, error) {
	if len(name) == 0 || len(name) >= syscall.IFNAMSIZ {
		return nil, fmt.Errorf("device name %q: 1 to %d characters", name, syscall.IFNAMSIZ-1)
	}
	fd, err := syscall.Open("/dev/net/tun", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	var req ifreq
	copy(req.name[:], name)
	req.flags = iffTun | iffNoPi
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), tunSetIff, uintptr(unsafe.Pointer(&req))); e != 0 {
		err = e
	}
	if err == nil {
		err = setUp(name)
	}
	// non-blocking, and only then handed to Go's poller: a tun fd registered with the
	// poller before TUNSETIFF attached it is never woken again after its first packet
	if err == nil {
		err = syscall.SetNonblock(fd, true)
	}
	if err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("tun device %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), "/dev/net/tun:"+name)
	return f, nil
}

// setUp sets IFF_UP on the device (ip link set NAME up).
func setUp(name string) error {
	s, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(s)
	var req ifreq
	copy(req.name[:], name)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(s), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&req))); e != 0 {
		return fmt.Errorf("SIOCGIFFLAGS: %w", e)
	}
	req.flags |= syscall.IFF_UP
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(s), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&req))); e != 0 {
		return fmt.Errorf("SIOCSIFFLAGS: %w", e)
	}
	return nil
}
