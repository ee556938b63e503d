// Hand-written Kafka wire encodings for the few requests the load generator sends and the
// response fields it reads. Field layouts follow Kafka's JSON message specs (as bundled with
// kafka-python 3.x) and are checked against the project's generated Python codecs by
// proto_test.go (golden vectors written by bench/golden.py).
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// API keys.
const (
	apiOffsetCommit    int16 = 8
	apiOffsetFetch     int16 = 9
	apiFindCoordinator int16 = 10
	apiJoinGroup       int16 = 11
	apiHeartbeat       int16 = 12
	apiLeaveGroup      int16 = 13
	apiSyncGroup       int16 = 14
	apiApiVersions     int16 = 18
	apiCreateTopics    int16 = 19
)

// Error codes the generator reacts to.
const (
	errNone                  int16 = 0
	errUnknownTopicPartition int16 = 3
	errCoordinatorLoading    int16 = 14
	errCoordinatorNotAvail   int16 = 15
	errNotCoordinator        int16 = 16
	errIllegalGeneration     int16 = 22
	errUnknownMemberID       int16 = 25
	errRebalanceInProgress   int16 = 27
	errTopicAlreadyExists    int16 = 36
	errMemberIDRequired      int16 = 79
)

// flexible reports whether (api, version) uses flexible encoding (request header v2,
// response header v1; ApiVersions responses always use header v0).
func flexible(api, version int16) bool {
	switch api {
	case apiOffsetCommit:
		return version >= 8
	case apiOffsetFetch:
		return version >= 6
	case apiFindCoordinator:
		return version >= 3
	case apiJoinGroup:
		return version >= 6
	case apiHeartbeat, apiLeaveGroup, apiSyncGroup:
		return version >= 4
	case apiApiVersions:
		return version >= 3
	case apiCreateTopics:
		return version >= 5
	}
	return false
}

// ---- encoder ---------------------------------------------------------------------------

// Enc appends Kafka primitives to a byte slice. In flexible mode strings, bytes and arrays
// use the compact (unsigned varint length + 1) forms.
type Enc struct {
	b    []byte
	flex bool
}

func (e *Enc) i8(v int8) { e.b = append(e.b, byte(v)) }
func (e *Enc) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}
func (e *Enc) i16(v int16) { e.b = binary.BigEndian.AppendUint16(e.b, uint16(v)) }
func (e *Enc) i32(v int32) { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *Enc) i64(v int64) { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *Enc) uvarint(v uint64) {
	e.b = binary.AppendUvarint(e.b, v)
}
func (e *Enc) str(s string) {
	if e.flex {
		e.uvarint(uint64(len(s)) + 1)
	} else {
		e.i16(int16(len(s)))
	}
	e.b = append(e.b, s...)
}

// nstr writes a nullable string; nil means null.
func (e *Enc) nstr(s *string) {
	if s == nil {
		if e.flex {
			e.uvarint(0)
		} else {
			e.i16(-1)
		}
		return
	}
	e.str(*s)
}
func (e *Enc) bytes(p []byte) {
	if e.flex {
		e.uvarint(uint64(len(p)) + 1)
	} else {
		e.i32(int32(len(p)))
	}
	e.b = append(e.b, p...)
}
func (e *Enc) arrayLen(n int) {
	if e.flex {
		e.uvarint(uint64(n) + 1)
	} else {
		e.i32(int32(n))
	}
}

// tags writes an empty tagged-field section (flexible versions only).
func (e *Enc) tags() {
	if e.flex {
		e.b = append(e.b, 0)
	}
}

// beginRequest starts a frame: length placeholder and request header (v1 or v2).
func beginRequest(buf []byte, api, version int16, corr int32, clientID string) *Enc {
	e := &Enc{b: buf[:0]}
	e.i32(0)
	e.i16(api)
	e.i16(version)
	e.i32(corr)
	e.nstr(&clientID) // ClientId is a classic nullable string even in header v2
	e.flex = flexible(api, version)
	e.tags()
	return e
}

// finish back-patches the length prefix and returns the frame.
func (e *Enc) finish() []byte {
	binary.BigEndian.PutUint32(e.b[0:4], uint32(len(e.b)-4))
	return e.b
}

// setCorrelation rewrites the correlation id of an encoded request frame.
func setCorrelation(frame []byte, corr int32) {
	binary.BigEndian.PutUint32(frame[8:12], uint32(corr))
}

// ---- requests --------------------------------------------------------------------------

type Protocol struct {
	Name     string
	Metadata []byte
}

type Assignment struct {
	MemberID   string
	Assignment []byte
}

type CommitPartition struct {
	Partition int32
	Offset    int64
}

type CommitTopic struct {
	Name       string
	Partitions []CommitPartition
}

type FetchTopic struct {
	Name       string
	Partitions []int32
}

func encApiVersions(buf []byte, corr int32, clientID string, version int16) []byte {
	e := beginRequest(buf, apiApiVersions, version, corr, clientID)
	if version >= 3 {
		e.str("kgbench-loadgen")
		e.str("0.1")
		e.tags()
	}
	return e.finish()
}

func encFindCoordinator(buf []byte, corr int32, clientID string, version int16, key string) []byte {
	e := beginRequest(buf, apiFindCoordinator, version, corr, clientID)
	if version <= 3 {
		e.str(key)
		if version >= 1 {
			e.i8(0)
		}
	} else {
		e.i8(0)
		e.arrayLen(1)
		e.str(key)
	}
	e.tags()
	return e.finish()
}

// encJoinGroup supports v5..v9 (instance id always null, reason null).
func encJoinGroup(buf []byte, corr int32, clientID string, version int16, group string, sessionMs, rebalanceMs int32,
	memberID string, protocolType string, protocols []Protocol) []byte {
	e := beginRequest(buf, apiJoinGroup, version, corr, clientID)
	e.str(group)
	e.i32(sessionMs)
	e.i32(rebalanceMs)
	e.str(memberID)
	e.nstr(nil) // GroupInstanceId
	e.str(protocolType)
	e.arrayLen(len(protocols))
	for _, p := range protocols {
		e.str(p.Name)
		e.bytes(p.Metadata)
		e.tags()
	}
	if version >= 8 {
		e.nstr(nil) // Reason
	}
	e.tags()
	return e.finish()
}

// encSyncGroup supports v3..v5.
func encSyncGroup(buf []byte, corr int32, clientID string, version int16, group string, generation int32,
	memberID string, protocolType, protocolName string, assignments []Assignment) []byte {
	e := beginRequest(buf, apiSyncGroup, version, corr, clientID)
	e.str(group)
	e.i32(generation)
	e.str(memberID)
	e.nstr(nil) // GroupInstanceId
	if version >= 5 {
		e.nstr(&protocolType)
		e.nstr(&protocolName)
	}
	e.arrayLen(len(assignments))
	for _, a := range assignments {
		e.str(a.MemberID)
		e.bytes(a.Assignment)
		e.tags()
	}
	e.tags()
	return e.finish()
}

// encHeartbeat supports v3..v4.
func encHeartbeat(buf []byte, corr int32, clientID string, version int16, group string, generation int32, memberID string) []byte {
	e := beginRequest(buf, apiHeartbeat, version, corr, clientID)
	e.str(group)
	e.i32(generation)
	e.str(memberID)
	e.nstr(nil)
	e.tags()
	return e.finish()
}

// encLeaveGroup supports v3 (batch of members, no reasons).
func encLeaveGroup(buf []byte, corr int32, clientID string, group string, memberIDs []string) []byte {
	e := beginRequest(buf, apiLeaveGroup, 3, corr, clientID)
	e.str(group)
	e.arrayLen(len(memberIDs))
	for _, m := range memberIDs {
		e.str(m)
		e.nstr(nil)
	}
	return e.finish()
}

// encOffsetCommit supports v8 (leader epoch -1, metadata "").
func encOffsetCommit(buf []byte, corr int32, clientID string, group string, generation int32, memberID string,
	topics []CommitTopic) []byte {
	e := beginRequest(buf, apiOffsetCommit, 8, corr, clientID)
	e.str(group)
	e.i32(generation)
	e.str(memberID)
	e.nstr(nil) // GroupInstanceId
	e.arrayLen(len(topics))
	empty := ""
	for _, t := range topics {
		e.str(t.Name)
		e.arrayLen(len(t.Partitions))
		for _, p := range t.Partitions {
			e.i32(p.Partition)
			e.i64(p.Offset)
			e.i32(-1) // CommittedLeaderEpoch
			e.nstr(&empty)
			e.tags()
		}
		e.tags()
	}
	e.tags()
	return e.finish()
}

// encOffsetFetch supports v8 (one group; RequireStable false).
func encOffsetFetch(buf []byte, corr int32, clientID string, group string, topics []FetchTopic) []byte {
	e := beginRequest(buf, apiOffsetFetch, 8, corr, clientID)
	e.arrayLen(1)
	e.str(group)
	e.arrayLen(len(topics))
	for _, t := range topics {
		e.str(t.Name)
		e.arrayLen(len(t.Partitions))
		for _, p := range t.Partitions {
			e.i32(p)
		}
		e.tags()
	}
	e.tags()
	e.bool(false)
	e.tags()
	return e.finish()
}

// encCreateTopics supports v5 (no assignments, no configs, validateOnly false).
func encCreateTopics(buf []byte, corr int32, clientID string, names []string, partitions int32, timeoutMs int32) []byte {
	e := beginRequest(buf, apiCreateTopics, 5, corr, clientID)
	e.arrayLen(len(names))
	for _, n := range names {
		e.str(n)
		e.i32(partitions)
		e.i16(1)
		e.arrayLen(0)
		e.arrayLen(0)
		e.tags()
	}
	e.i32(timeoutMs)
	e.bool(false)
	e.tags()
	return e.finish()
}

// ---- decoder ---------------------------------------------------------------------------

var errShort = errors.New("response truncated")

// Dec reads Kafka primitives; the first error sticks and later reads return zero values.
type Dec struct {
	b    []byte
	pos  int
	flex bool
	err  error
}

func (d *Dec) need(n int) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || d.pos+n > len(d.b) {
		d.err = errShort
		return false
	}
	return true
}
func (d *Dec) i8() int8 {
	if !d.need(1) {
		return 0
	}
	v := int8(d.b[d.pos])
	d.pos++
	return v
}
func (d *Dec) bool() bool { return d.i8() != 0 }
func (d *Dec) i16() int16 {
	if !d.need(2) {
		return 0
	}
	v := int16(binary.BigEndian.Uint16(d.b[d.pos:]))
	d.pos += 2
	return v
}
func (d *Dec) i32() int32 {
	if !d.need(4) {
		return 0
	}
	v := int32(binary.BigEndian.Uint32(d.b[d.pos:]))
	d.pos += 4
	return v
}
func (d *Dec) i64() int64 {
	if !d.need(8) {
		return 0
	}
	v := int64(binary.BigEndian.Uint64(d.b[d.pos:]))
	d.pos += 8
	return v
}
func (d *Dec) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.pos:])
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.pos += n
	return v
}

// length of a string/bytes/array; -1 means null.
func (d *Dec) strLen() int {
	if d.flex {
		return int(d.uvarint()) - 1
	}
	return int(d.i16())
}
func (d *Dec) str() string {
	n := d.strLen()
	if n < 0 || !d.need(n) {
		return ""
	}
	s := string(d.b[d.pos : d.pos+n])
	d.pos += n
	return s
}
func (d *Dec) skipStr() {
	n := d.strLen()
	if n > 0 && d.need(n) {
		d.pos += n
	}
}
func (d *Dec) bytes() []byte {
	var n int
	if d.flex {
		n = int(d.uvarint()) - 1
	} else {
		n = int(d.i32())
	}
	if n < 0 || !d.need(n) {
		return nil
	}
	p := d.b[d.pos : d.pos+n]
	d.pos += n
	return p
}
func (d *Dec) arrayLen() int {
	var n int
	if d.flex {
		n = int(d.uvarint()) - 1
	} else {
		n = int(d.i32())
	}
	if d.err == nil && n > len(d.b)-d.pos {
		d.err = fmt.Errorf("array length %d beyond the response", n)
		return 0
	}
	return n
}

// skipTags skips a tagged-field section (flexible versions only).
func (d *Dec) skipTags() {
	if !d.flex {
		return
	}
	n := d.uvarint()
	for i := uint64(0); i < n && d.err == nil; i++ {
		d.uvarint()
		size := int(d.uvarint())
		if d.need(size) {
			d.pos += size
		}
	}
}

// responseBody returns a decoder positioned after the response header of a frame (without
// its length prefix), and the correlation id.
func responseBody(frame []byte, api, version int16) (*Dec, int32) {
	d := &Dec{b: frame}
	corr := d.i32()
	d.flex = flexible(api, version)
	if d.flex && api != apiApiVersions {
		d.skipTags()
	}
	return d, corr
}

// ---- responses -------------------------------------------------------------------------

type ApiVersionsResp struct {
	ErrorCode int16
	Versions  map[int16][2]int16
}

func decApiVersions(d *Dec) (ApiVersionsResp, error) {
	r := ApiVersionsResp{Versions: map[int16][2]int16{}}
	r.ErrorCode = d.i16()
	n := d.arrayLen()
	for i := 0; i < n && d.err == nil; i++ {
		k := d.i16()
		lo := d.i16()
		hi := d.i16()
		d.skipTags()
		r.Versions[k] = [2]int16{lo, hi}
	}
	return r, d.err
}

type FindCoordinatorResp struct {
	ErrorCode int16
	NodeID    int32
	Host      string
	Port      int32
}

func decFindCoordinator(d *Dec, version int16) (FindCoordinatorResp, error) {
	var r FindCoordinatorResp
	d.i32() // throttle
	if version <= 3 {
		r.ErrorCode = d.i16()
		d.skipStr() // error message
		r.NodeID = d.i32()
		r.Host = d.str()
		r.Port = d.i32()
		d.skipTags()
		return r, d.err
	}
	n := d.arrayLen()
	for i := 0; i < n && d.err == nil; i++ {
		d.skipStr() // key
		nodeID := d.i32()
		host := d.str()
		port := d.i32()
		ec := d.i16()
		d.skipStr()
		d.skipTags()
		if i == 0 {
			r = FindCoordinatorResp{ec, nodeID, host, port}
		}
	}
	d.skipTags()
	return r, d.err
}

type JoinMember struct {
	MemberID string
	Metadata []byte
}

type JoinGroupResp struct {
	ErrorCode    int16
	GenerationID int32
	ProtocolName string
	Leader       string
	MemberID     string
	Members      []JoinMember
}

func decJoinGroup(d *Dec, version int16) (JoinGroupResp, error) {
	var r JoinGroupResp
	d.i32() // throttle
	r.ErrorCode = d.i16()
	r.GenerationID = d.i32()
	if version >= 7 {
		d.skipStr() // protocol type
	}
	r.ProtocolName = d.str()
	r.Leader = d.str()
	if version >= 9 {
		d.bool() // skip assignment
	}
	r.MemberID = d.str()
	n := d.arrayLen()
	if n > 0 {
		r.Members = make([]JoinMember, 0, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		m := JoinMember{MemberID: d.str()}
		d.skipStr() // group instance id
		m.Metadata = d.bytes()
		d.skipTags()
		r.Members = append(r.Members, m)
	}
	d.skipTags()
	return r, d.err
}

type SyncGroupResp struct {
	ErrorCode  int16
	Assignment []byte
}

func decSyncGroup(d *Dec, version int16) (SyncGroupResp, error) {
	var r SyncGroupResp
	d.i32()
	r.ErrorCode = d.i16()
	if version >= 5 {
		d.skipStr()
		d.skipStr()
	}
	r.Assignment = d.bytes()
	d.skipTags()
	return r, d.err
}

func decHeartbeat(d *Dec) (int16, error) {
	d.i32()
	ec := d.i16()
	d.skipTags()
	return ec, d.err
}

type LeaveGroupResp struct {
	ErrorCode    int16
	MemberErrors []int16
}

func decLeaveGroup(d *Dec) (LeaveGroupResp, error) {
	var r LeaveGroupResp
	d.i32()
	r.ErrorCode = d.i16()
	n := d.arrayLen()
	for i := 0; i < n && d.err == nil; i++ {
		d.skipStr()
		d.skipStr()
		r.MemberErrors = append(r.MemberErrors, d.i16())
	}
	return r, d.err
}

// decOffsetCommit returns the number of partitions answered and the first non-zero error.
func decOffsetCommit(d *Dec) (partitions int, firstErr int16, err error) {
	d.i32()
	nt := d.arrayLen()
	for t := 0; t < nt && d.err == nil; t++ {
		d.skipStr()
		np := d.arrayLen()
		for p := 0; p < np && d.err == nil; p++ {
			d.i32()
			ec := d.i16()
			d.skipTags()
			if ec != 0 && firstErr == 0 {
				firstErr = ec
			}
			partitions++
		}
		d.skipTags()
	}
	d.skipTags()
	return partitions, firstErr, d.err
}

type FetchedOffset struct {
	Topic     string
	Partition int32
	Offset    int64
	ErrorCode int16
}

// decOffsetFetch (v8) returns the offsets of the first group and the first non-zero error
// (group-level or partition-level).
func decOffsetFetch(d *Dec, keep bool) (offsets []FetchedOffset, partitions int, firstErr int16, err error) {
	d.i32()
	ng := d.arrayLen()
	for g := 0; g < ng && d.err == nil; g++ {
		d.skipStr()
		nt := d.arrayLen()
		for t := 0; t < nt && d.err == nil; t++ {
			name := d.str()
			np := d.arrayLen()
			for p := 0; p < np && d.err == nil; p++ {
				part := d.i32()
				off := d.i64()
				d.i32()
				d.skipStr()
				ec := d.i16()
				d.skipTags()
				if ec != 0 && firstErr == 0 {
					firstErr = ec
				}
				partitions++
				if keep {
					offsets = append(offsets, FetchedOffset{name, part, off, ec})
				}
			}
			d.skipTags()
		}
		ec := d.i16()
		if ec != 0 && firstErr == 0 {
			firstErr = ec
		}
		d.skipTags()
	}
	d.skipTags()
	return offsets, partitions, firstErr, d.err
}

// decCreateTopics returns the per-topic error codes.
func decCreateTopics(d *Dec) (map[string]int16, error) {
	out := map[string]int16{}
	d.i32()
	n := d.arrayLen()
	for i := 0; i < n && d.err == nil; i++ {
		name := d.str()
		ec := d.i16()
		d.skipStr() // message
		d.i32()     // num partitions
		d.i16()     // replication factor
		nc := d.arrayLen()
		for c := 0; c < nc && d.err == nil; c++ {
			d.skipStr()
			d.skipStr()
			d.bool()
			d.i8()
			d.bool()
			d.skipTags()
		}
		d.skipTags()
		out[name] = ec
	}
	d.skipTags()
	return out, d.err
}
