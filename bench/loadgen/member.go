package main

import (
	"fmt"
	"time"
)

// Versions is the set of group API versions a simulated client speaks.
type Versions struct {
	Join, Sync, Heartbeat, FindCoordinator int16
}

var (
	modernVersions = Versions{Join: 9, Sync: 5, Heartbeat: 4, FindCoordinator: 4} // Java / franz-go
	legacyVersions = Versions{Join: 5, Sync: 3, Heartbeat: 3, FindCoordinator: 3} // librdkafka-era
)

func (v Versions) need() map[int16]int16 {
	return map[int16]int16{
		apiJoinGroup: v.Join, apiSyncGroup: v.Sync, apiHeartbeat: v.Heartbeat, apiFindCoordinator: v.FindCoordinator,
	}
}

const (
	protocolType = "consumer"
	protocolName = "range"
)

// subscription encodes a ConsumerProtocolSubscription v0 (topics, null user data).
func subscription(topics []string) []byte {
	e := &Enc{}
	e.i16(0)
	e.arrayLen(len(topics))
	for _, t := range topics {
		e.str(t)
	}
	e.i32(-1)
	return e.b
}

// assignment encodes a ConsumerProtocolAssignment v0 for one topic.
func assignment(topic string, partitions []int32) []byte {
	e := &Enc{}
	e.i16(0)
	e.arrayLen(1)
	e.str(topic)
	e.arrayLen(len(partitions))
	for _, p := range partitions {
		e.i32(p)
	}
	e.i32(-1)
	return e.b
}

// MemberCfg is shared by the members of one group.
type MemberCfg struct {
	Group       string
	SessionMs   int32
	RebalanceMs int32
	V           Versions
	Topic       string
	Partitions  int32 // partitions the leader spreads over the members (range-style)
	protocols   []Protocol
}

func (c *MemberCfg) init() {
	c.protocols = []Protocol{{Name: protocolName, Metadata: subscription([]string{c.Topic})}}
}

// Member is one classic-protocol group member on its own connection.
type Member struct {
	c          *Conn
	cfg        *MemberCfg
	Coord      string // the address the member's group was set up at (its coordinator)
	ID         string
	Generation int32
	Leader     bool
	Members    []JoinMember
	Assignment []byte
}

type ErrCode struct {
	API  int16
	Code int16
}

func (e ErrCode) Error() string { return fmt.Sprintf("api %d error %d", e.API, e.Code) }

// join sends JoinGroup until it gets a generation, doing the KIP-394 MEMBER_ID_REQUIRED round
// trip for a new member. firstSent is called just before the first request goes out.
func (m *Member) join(deadline time.Time, firstSent func()) error {
	cfg := m.cfg
	for attempt := 0; ; attempt++ {
		if time.Now().After(deadline) {
			return fmt.Errorf("join: deadline passed")
		}
		frame := encJoinGroup(m.c.wbuf, m.c.nextCorr(), m.c.clientID, cfg.V.Join, cfg.Group, cfg.SessionMs, cfg.RebalanceMs,
			m.ID, protocolType, cfg.protocols)
		if attempt == 0 && firstSent != nil {
			firstSent()
		}
		d, err := m.c.roundTrip(frame, apiJoinGroup, cfg.V.Join, deadline)
		if err != nil {
			return fmt.Errorf("JoinGroup: %w", err)
		}
		r, err := decJoinGroup(d, cfg.V.Join)
		if err != nil {
			return fmt.Errorf("JoinGroup: %w", err)
		}
		switch r.ErrorCode {
		case errNone:
			m.ID = r.MemberID
			m.Generation = r.GenerationID
			m.Leader = r.Leader == r.MemberID
			m.Members = r.Members
			return nil
		case errMemberIDRequired:
			m.ID = r.MemberID
		case errUnknownMemberID:
			m.ID = ""
		case errRebalanceInProgress, errCoordinatorLoading, errCoordinatorNotAvail, errNotCoordinator:
			time.Sleep(20 * time.Millisecond)
		default:
			return ErrCode{apiJoinGroup, r.ErrorCode}
		}
		if attempt > 1000 {
			return fmt.Errorf("join: too many attempts (last error %d)", r.ErrorCode)
		}
	}
}

// assignments builds the leader's SyncGroup assignments: partitions spread round robin.
func (m *Member) assignments() []Assignment {
	n := len(m.Members)
	out := make([]Assignment, n)
	parts := make([][]int32, n)
	if n > 0 {
		for p := int32(0); p < m.cfg.Partitions; p++ {
			i := int(p) % n
			parts[i] = append(parts[i], p)
		}
	}
	for i, jm := range m.Members {
		out[i] = Assignment{MemberID: jm.MemberID, Assignment: assignment(m.cfg.Topic, parts[i])}
	}
	return out
}

// sync sends SyncGroup for the current generation; the result is the error code.
func (m *Member) sync(deadline time.Time) (int16, error) {
	cfg := m.cfg
	var as []Assignment
	if m.Leader {
		as = m.assignments()
	}
	frame := encSyncGroup(m.c.wbuf, m.c.nextCorr(), m.c.clientID, cfg.V.Sync, cfg.Group, m.Generation, m.ID,
		protocolType, protocolName, as)
	d, err := m.c.roundTrip(frame, apiSyncGroup, cfg.V.Sync, deadline)
	if err != nil {
		return 0, fmt.Errorf("SyncGroup: %w", err)
	}
	r, err := decSyncGroup(d, cfg.V.Sync)
	if err != nil {
		return 0, fmt.Errorf("SyncGroup: %w", err)
	}
	if r.ErrorCode == errNone {
		m.Assignment = append(m.Assignment[:0], r.Assignment...)
	}
	return r.ErrorCode, nil
}

func (m *Member) heartbeat(deadline time.Time) (int16, error) {
	cfg := m.cfg
	frame := encHeartbeat(m.c.wbuf, m.c.nextCorr(), m.c.clientID, cfg.V.Heartbeat, cfg.Group, m.Generation, m.ID)
	d, err := m.c.roundTrip(frame, apiHeartbeat, cfg.V.Heartbeat, deadline)
	if err != nil {
		return 0, fmt.Errorf("Heartbeat: %w", err)
	}
	return decHeartbeat(d)
}

// rejoinable reports whether an error code sends the member back to JoinGroup.
func rejoinable(ec int16) bool {
	switch ec {
	case errRebalanceInProgress, errIllegalGeneration, errUnknownMemberID:
		return true
	}
	return false
}

// joinAndSync runs join + sync until the member holds an assignment for a generation.
func (m *Member) joinAndSync(deadline time.Time) error {
	for i := 0; i < 100; i++ {
		if err := m.join(deadline, nil); err != nil {
			return err
		}
		ec, err := m.sync(deadline)
		if err != nil {
			return err
		}
		if ec == errNone {
			return nil
		}
		if !rejoinable(ec) {
			return ErrCode{apiSyncGroup, ec}
		}
		if ec == errUnknownMemberID {
			m.ID = ""
		}
	}
	return fmt.Errorf("joinAndSync: no stable generation after 100 rounds")
}

// commit sends one OffsetCommit v8 as this member and returns the first partition error.
func (m *Member) commit(topic string, partitions []int32, offset int64, deadline time.Time) (int16, error) {
	ps := make([]CommitPartition, len(partitions))
	for i, p := range partitions {
		ps[i] = CommitPartition{p, offset}
	}
	frame := encOffsetCommit(m.c.wbuf, m.c.nextCorr(), m.c.clientID, m.cfg.Group, m.Generation, m.ID,
		[]CommitTopic{{topic, ps}})
	d, err := m.c.roundTrip(frame, apiOffsetCommit, 8, deadline)
	if err != nil {
		return 0, fmt.Errorf("OffsetCommit: %w", err)
	}
	n, ec, err := decOffsetCommit(d)
	if err == nil && n != len(partitions) {
		err = fmt.Errorf("OffsetCommit: %d partitions answered, %d sent", n, len(partitions))
	}
	return ec, err
}

// decodeAssignment returns the partitions of a ConsumerProtocolAssignment (for checks).
func decodeAssignment(b []byte) (map[string][]int32, error) {
	out := map[string][]int32{}
	if len(b) == 0 {
		return out, nil
	}
	d := &Dec{b: b}
	d.i16()
	nt := d.arrayLen()
	for t := 0; t < nt && d.err == nil; t++ {
		name := d.str()
		np := d.arrayLen()
		for p := 0; p < np && d.err == nil; p++ {
			out[name] = append(out[name], d.i32())
		}
	}
	return out, d.err
}
