package pgtest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards TCP connections from its own address on 127.0.0.1 to a
// server's, and can cut them as a network partition does: while cut, it
// forwards nothing and answers nothing, in either direction, on old and
// new connections alike (no reset, no close: the peers see silence until
// their own timeouts). Heal closes what the cut left hanging and forwards
// again.
type Proxy struct {
	ln     net.Listener
	target string
	cut    atomic.Bool

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  chan struct{}
}

// NewProxy starts a proxy to target (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	go p.serve()
	return p, nil
}

// Addr is the proxy's own address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut stops all forwarding, as a partition would.
func (p *Proxy) Cut() { p.cut.Store(true) }

// Heal ends the connections the cut left hanging and forwards again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	p.cut.Store(false)
}

// Close stops the proxy and ends every connection.
func (p *Proxy) Close() {
	close(p.done)
	p.ln.Close()
	p.Heal()
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *Proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

func (p *Proxy) handle(c net.Conn) {
	p.track(c)
	for p.cut.Load() { // a new connection while cut: silence
		select {
		case <-p.done:
			c.Close()
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.track(s)
	go p.pipe(s, c)
	p.pipe(c, s)
}

// pipe copies from src to dst, holding what it read while the proxy is
// cut.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for p.cut.Load() {
				select {
				case <-p.done:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}
