package sshhost

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// CutProxy is a TCP proxy on 127.0.0.1 in front of a target address (an
// sshd) that can drop connections mid-transfer: point the client at
// proxy.Addr instead of the server.
//
// CutAfter(n) arms it: every connection, open or new, is cut abruptly
// (both sides closed, no SSH disconnect message) once n more bytes have gone
// from the client to the server, counted from the call for open
// connections and from the connection's start for new ones. The bytes up to
// the limit are forwarded; the rest is lost. CutNow cuts every open
// connection at once. Disarm stops cutting.
type CutProxy struct {
	// Addr is the proxy's "127.0.0.1:PORT".
	Addr   string
	target string
	ln     net.Listener

	mu     sync.Mutex
	limit  int64 // bytes client->server allowed per connection; < 0: unlimited
	conns  map[*proxyConn]struct{}
	closed bool
	wg     sync.WaitGroup

	cuts     atomic.Int64
	accepted atomic.Int64
}

type proxyConn struct {
	client, server net.Conn
	mu             sync.Mutex
	remaining      int64 // < 0: unlimited
	cut            bool
	open           atomic.Int32 // directions still copying
}

// NewCutProxy starts a proxy to target (e.g. an SSHD's Addr), disarmed.
func NewCutProxy(target string) (*CutProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &CutProxy{Addr: ln.Addr().String(), target: target, ln: ln, limit: -1, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// CutAfter arms the proxy to cut each connection after n more bytes from
// client to server (see CutProxy). n < 0 disarms.
func (p *CutProxy) CutAfter(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.limit = n
	for c := range p.conns {
		c.mu.Lock()
		c.remaining = n
		c.mu.Unlock()
	}
}

// Disarm stops cutting connections (CutAfter(-1)).
func (p *CutProxy) Disarm() { p.CutAfter(-1) }

// CutNow cuts every open connection.
func (p *CutProxy) CutNow() {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		p.cut(c)
	}
}

// Cuts returns how many connections the proxy has cut so far.
func (p *CutProxy) Cuts() int { return int(p.cuts.Load()) }

// Accepted returns how many connections the proxy has accepted so far.
func (p *CutProxy) Accepted() int { return int(p.accepted.Load()) }

// Close stops accepting, closes every open connection and waits for the
// proxy's goroutines. Safe to call more than once.
func (p *CutProxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	err := p.ln.Close()
	for c := range p.conns {
		c.client.Close()
		c.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *CutProxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		c := &proxyConn{client: client, server: server}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		}
		c.remaining = p.limit
		c.open.Store(2)
		p.conns[c] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.forward(c, true)
		go p.forward(c, false)
	}
}

// forward copies one direction; upstream is client -> server, the
// direction CutAfter counts.
func (p *CutProxy) forward(c *proxyConn, upstream bool) {
	defer p.wg.Done()
	src, dst := c.server, c.client
	if upstream {
		src, dst = c.client, c.server
	}
	buf := make([]byte, 32<<10)
	defer func() {
		if c.open.Add(-1) == 0 {
			p.release(c)
		}
	}()
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			chunk, cutHere := buf[:n], false
			if upstream {
				c.mu.Lock()
				if c.remaining >= 0 {
					if int64(n) >= c.remaining {
						chunk, cutHere = buf[:c.remaining], true
						c.remaining = 0
					} else {
						c.remaining -= int64(n)
					}
				}
				c.mu.Unlock()
			}
			if len(chunk) > 0 {
				if _, werr := dst.Write(chunk); werr != nil {
					p.release(c)
					return
				}
			}
			if cutHere {
				p.cut(c)
				return
			}
		}
		if rerr == io.EOF {
			// Half-close, as a TCP peer would see it; the other
			// direction goes on until it ends too.
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
				return
			}
		}
		if rerr != nil {
			p.release(c)
			return
		}
	}
}

// release closes both sides of c and forgets it.
func (p *CutProxy) release(c *proxyConn) {
	c.client.Close()
	c.server.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// cut drops both sides of c abruptly (RST where possible).
func (p *CutProxy) cut(c *proxyConn) {
	c.mu.Lock()
	already := c.cut
	c.cut = true
	c.mu.Unlock()
	if already {
		return
	}
	p.cuts.Add(1)
	for _, nc := range []net.Conn{c.client, c.server} {
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		nc.Close()
	}
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}
