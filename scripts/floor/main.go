// Command floor is the least a Go program can do of what snag list does:
// it reads .snag/.port in the working directory, dials snagd there with
// package net, as snag's client does, asks GET /health and writes the
// answer. scripts/bench-cli times it beside snag, in the same run, as the
// floor of this machine: the Go runtime's start, one file, one loopback
// request.
package main

import (
	"io"
	"net"
	"os"
	"strings"
)

func main() {
	b, err := os.ReadFile(".snag/.port")
	if err != nil {
		os.Stderr.WriteString("floor: " + err.Error() + ": run it in a project that snagd serves\n")
		os.Exit(1)
	}
	port := strings.TrimSpace(string(b))
	c, err := net.Dial("tcp", "127.0.0.1:"+port)
	if err != nil {
		os.Stderr.WriteString("floor: " + err.Error() + "\n")
		os.Exit(1)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\nConnection: close\r\n\r\n"); err != nil {
		os.Stderr.WriteString("floor: " + err.Error() + "\n")
		os.Exit(1)
	}
	io.Copy(os.Stdout, c)
}
