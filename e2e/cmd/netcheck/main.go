// Command netcheck is the e2e test image's only binary: a TCP token server and a client
// that proves it reached the server. Static (CGO_ENABLED=0), so its image is FROM scratch.
//
//	netcheck serve -port 7777 -token T   answer every connection with "T\n"
//	netcheck fetch -addr IP:7777 -want T  connect (retrying until -timeout), read one
//	                                       line, exit 0 if it is T, 1 otherwise
//	netcheck rtt -addr IP:7777 [-count 10]  time TCP connects (rtt.go)
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: netcheck serve|fetch|rtt [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "fetch":
		err = fetch(os.Args[2:])
	case "rtt":
		err = rtt(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "netcheck:", err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	port := fs.Int("port", 7777, "TCP port to listen on")
	token := fs.String("token", "", "token to send to every client")
	_ = fs.Parse(args)
	if *token == "" {
		return fmt.Errorf("serve: -token is required")
	}
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", *port))
	if err != nil {
		return err
	}
	fmt.Printf("serving on %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func(c net.Conn) {
			defer c.Close()
			fmt.Printf("connection from %s\n", c.RemoteAddr())
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = fmt.Fprintln(c, *token)
		}(c)
	}
}

func fetch(args []string) error {
	fs := flag.NewFlagSet("fetch", flag.ExitOnError)
	addr := fs.String("addr", "", "server address, IP:port")
	want := fs.String("want", "", "expected token")
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
	_ = fs.Parse(args)
	if *addr == "" || *want == "" {
		return fmt.Errorf("fetch: -addr and -want are required")
	}
	deadline := time.Now().Add(*timeout)
	for attempt := 1; ; attempt++ {
		got, err := fetchOnce(*addr)
		if err == nil {
			if got != *want {
				return fmt.Errorf("got token %q from %s, want %q", got, *addr, *want)
			}
			fmt.Printf("got token %q from %s (attempt %d)\n", got, *addr, attempt)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no token from %s after %d attempts: %w", *addr, attempt, err)
		}
		fmt.Printf("attempt %d: %v\n", attempt, err)
		time.Sleep(time.Second)
	}
}

func fetchOnce(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(line), nil
}
