package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

const maxFrame = 64 << 20

// Conn is one client connection used synchronously: write a request, read its response.
type Conn struct {
	addr     string
	nc       net.Conn
	r        *bufio.Reader
	corr     int32
	clientID string
	wbuf     []byte
	rbuf     []byte
}

func dial(addr, clientID string, timeout time.Duration) (*Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return &Conn{addr: addr, nc: nc, r: bufio.NewReaderSize(nc, 64<<10), clientID: clientID, wbuf: make([]byte, 0, 4096)}, nil
}

func (c *Conn) Close() { _ = c.nc.Close() }

func (c *Conn) nextCorr() int32 {
	c.corr++
	return c.corr
}

// readFrame reads one response frame (without the length prefix) into a reused buffer.
func readFrame(r *bufio.Reader, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return buf, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n < 4 || n > maxFrame {
		return buf, fmt.Errorf("bad response frame size %d", n)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(r, buf)
	return buf, err
}

// roundTrip sends a complete request frame and returns the response body decoder. The
// decoder's buffer is reused by the next call on this connection.
func (c *Conn) roundTrip(frame []byte, api, version int16, deadline time.Time) (*Dec, error) {
	corr := int32(binary.BigEndian.Uint32(frame[8:12]))
	_ = c.nc.SetDeadline(deadline)
	if _, err := c.nc.Write(frame); err != nil {
		return nil, err
	}
	var err error
	c.rbuf, err = readFrame(c.r, c.rbuf)
	if err != nil {
		return nil, err
	}
	d, got := responseBody(c.rbuf, api, version)
	if got != corr {
		return nil, fmt.Errorf("api %d: correlation id %d, expected %d", api, got, corr)
	}
	return d, nil
}

// coordinatorErr is a FindCoordinator answer with an error code.
type coordinatorErr struct{ code int16 }

func (e coordinatorErr) Error() string { return fmt.Sprintf("FindCoordinator error %d", e.code) }

// isRetriableCoordinatorErr: COORDINATOR_LOAD_IN_PROGRESS (14) or COORDINATOR_NOT_AVAILABLE (15).
func isRetriableCoordinatorErr(err error) bool {
	var ce coordinatorErr
	return errors.As(err, &ce) && (ce.code == 14 || ce.code == 15)
}

// handshake sends ApiVersions v3 and FindCoordinator for the group, as a client opening
// its coordinator connection does; it checks the APIs/versions the run needs. The answer's
// address is returned ("" without a group).
func (c *Conn) handshake(group string, fcVersion int16, need map[int16]int16, deadline time.Time) (string, error) {
	d, err := c.roundTrip(encApiVersions(c.wbuf, c.nextCorr(), c.clientID, 3), apiApiVersions, 3, deadline)
	if err != nil {
		return "", fmt.Errorf("ApiVersions: %w", err)
	}
	av, err := decApiVersions(d)
	if err != nil {
		return "", fmt.Errorf("ApiVersions: %w", err)
	}
	if av.ErrorCode != 0 {
		return "", fmt.Errorf("ApiVersions error %d", av.ErrorCode)
	}
	for api, v := range need {
		r, ok := av.Versions[api]
		if !ok || v < r[0] || v > r[1] {
			return "", fmt.Errorf("server does not serve api %d version %d (has %v)", api, v, r)
		}
	}
	if group == "" {
		return "", nil
	}
	d, err = c.roundTrip(encFindCoordinator(c.wbuf, c.nextCorr(), c.clientID, fcVersion, group), apiFindCoordinator, fcVersion, deadline)
	if err != nil {
		return "", fmt.Errorf("FindCoordinator: %w", err)
	}
	fc, err := decFindCoordinator(d, fcVersion)
	if err != nil {
		return "", fmt.Errorf("FindCoordinator: %w", err)
	}
	if fc.ErrorCode != 0 {
		return "", coordinatorErr{fc.ErrorCode}
	}
	return net.JoinHostPort(fc.Host, strconv.Itoa(int(fc.Port))), nil
}

func (c *Conn) createTopics(names []string, partitions int32, deadline time.Time) error {
	d, err := c.roundTrip(encCreateTopics(c.wbuf, c.nextCorr(), c.clientID, names, partitions, 30000), apiCreateTopics, 5, deadline)
	if err != nil {
		return fmt.Errorf("CreateTopics: %w", err)
	}
	res, err := decCreateTopics(d)
	if err != nil {
		return fmt.Errorf("CreateTopics: %w", err)
	}
	for name, ec := range res {
		if ec != 0 && ec != errTopicAlreadyExists {
			return fmt.Errorf("CreateTopics %s: error %d", name, ec)
		}
	}
	return nil
}
