package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// ifioctl runs a SIOC* ioctl on req through a datagram socket of this thread's namespace.
func ifioctl(op uintptr, req *ifreq) error {
	s, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(s)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(s), op, uintptr(unsafe.Pointer(req))); e != 0 {
		return e
	}
	return nil
}

// setIPv4 puts a sockaddr_in (the address part of struct ifreq) into req.
func setIPv4(req *ifreq, ip [4]byte) {
	b := (*[24]byte)(unsafe.Pointer(&req.flags))
	*b = [24]byte{}
	binary.LittleEndian.PutUint16(b[0:], syscall.AF_INET)
	copy(b[4:8], ip[:])
}

// collector keeps what the delay line writes.
type collector struct {
	mu   sync.Mutex
	pkts [][]byte
}

func (c *collector) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.pkts = append(c.pkts, append([]byte(nil), p...))
	c.mu.Unlock()
	return len(p), nil
}

func (c *collector) udp() (n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pkts {
		if len(p) > 28 && p[0]>>4 == 4 && p[9] == syscall.IPPROTO_UDP && bytes.HasPrefix(p[28:], []byte("tick")) {
			n++
		}
	}
	return n
}

// In a network namespace of its own (nothing on this host is touched): a real tun device
// made by OpenTun is up, every packet routed into it reaches the delay line (read through
// Go's poller, packet after packet), and it goes away when its file is closed.
func TestTunDeliversEveryPacketToTheDelayLine(t *testing.T) {
	runtime.LockOSThread() // never unlocked: the thread ends with the test, namespace and all
	if err := syscall.Unshare(syscall.CLONE_NEWNET); err != nil {
		t.Skipf("cannot make a network namespace here (needs CAP_SYS_ADMIN): %v", err)
	}
	const name = "cxwantest0"
	f, err := OpenTun(name)
	if err != nil {
		t.Skipf("cannot create a tun device here (needs CAP_NET_ADMIN and /dev/net/tun): %v", err)
	}
	var req ifreq
	copy(req.name[:], name)
	if err := ifioctl(syscall.SIOCGIFFLAGS, &req); err != nil || req.flags&syscall.IFF_UP == 0 {
		t.Fatalf("device %s not up after OpenTun (flags %#x, %v)", name, req.flags, err)
	}
	// 198.18.0.1/24 on the device: the kernel routes 198.18.0.0/24 into it
	setIPv4(&req, [4]byte{198, 18, 0, 1})
	if err := ifioctl(syscall.SIOCSIFADDR, &req); err != nil {
		t.Fatalf("address: %v", err)
	}
	setIPv4(&req, [4]byte{255, 255, 255, 0})
	if err := ifioctl(syscall.SIOCSIFNETMASK, &req); err != nil {
		t.Fatalf("netmask: %v", err)
	}

	d, err := NewDelayLine(Config{Delay: 10 * time.Millisecond, Queue: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := &collector{}
	done := make(chan error, 1)
	go func() { done <- d.Run(f, out) }()
	s, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(s)
	const n = 50
	for i := 0; i < n; i++ {
		if err := syscall.Sendto(s, []byte("tick"), 0, &syscall.SockaddrInet4{Port: 9, Addr: [4]byte{198, 18, 0, 2}}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	for i := 0; out.udp() < n; i++ {
		if i > 100 {
			t.Fatalf("%d of %d packets came out of the tun device through the delay line (read %d)", out.udp(), n, d.Stats.Read.Load())
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.Close()
	if err := <-done; err != nil {
		t.Errorf("Run ended with %v when its device was closed", err)
	}
	for i := 0; ; i++ {
		if err := ifioctl(syscall.SIOCGIFFLAGS, &req); errors.Is(err, syscall.ENODEV) {
			break
		}
		if i > 100 {
			t.Fatalf("device %s still there 10 s after its file was closed", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := OpenTun("a-name-far-too-long-for-linux"); err == nil {
		t.Error("a 29-character device name was accepted")
	}
}
