package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
)

// Inputs shared with bench/golden.py.
const (
	gClient = "bench-client"
	gGroup  = "group-1"
	gMember = "member-1-0123456789abcdef"
	gOther  = "member-2-fedcba9876543210"
	gTopic  = "topic-a"
)

func seq(from, to byte) []byte {
	var b []byte
	for i := from; i < to; i++ {
		b = append(b, i)
	}
	return b
}

type golden struct {
	Requests  map[string]string `json:"requests"`
	Responses map[string]string `json:"responses"`
}

func loadGolden(t *testing.T) golden {
	raw, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatalf("%v (run: .venv/bin/python bench/golden.py)", err)
	}
	var g golden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func unhex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRequestsMatchGeneratedCodecs(t *testing.T) {
	g := loadGolden(t)
	metadata := seq(0, 20)
	protocols := []Protocol{{"range", metadata}, {"sticky", []byte{}}}
	assignments := []Assignment{{gMember, seq(7, 19)}, {gOther, []byte{}}}
	commit := []CommitTopic{{gTopic, []CommitPartition{{0, 1000}, {1, 1001}, {2, 1002}}}}
	ours := map[string][]byte{
		"api_versions_v3":         encApiVersions(nil, 7, gClient, 3),
		"find_coordinator_v3":     encFindCoordinator(nil, 8, gClient, 3, gGroup),
		"find_coordinator_v4":     encFindCoordinator(nil, 9, gClient, 4, gGroup),
		"join_group_v5_new":       encJoinGroup(nil, 10, gClient, 5, gGroup, 45000, 60000, "", "consumer", protocols),
		"join_group_v5_known":     encJoinGroup(nil, 10, gClient, 5, gGroup, 45000, 60000, gMember, "consumer", protocols),
		"join_group_v9_new":       encJoinGroup(nil, 10, gClient, 9, gGroup, 45000, 60000, "", "consumer", protocols),
		"join_group_v9_known":     encJoinGroup(nil, 10, gClient, 9, gGroup, 45000, 60000, gMember, "consumer", protocols),
		"sync_group_v3":           encSyncGroup(nil, 11, gClient, 3, gGroup, 3, gMember, "consumer", "range", assignments),
		"sync_group_v5":           encSyncGroup(nil, 11, gClient, 5, gGroup, 3, gMember, "consumer", "range", assignments),
		"heartbeat_v3":            encHeartbeat(nil, 12, gClient, 3, gGroup, 3, gMember),
		"heartbeat_v4":            encHeartbeat(nil, 12, gClient, 4, gGroup, 3, gMember),
		"leave_group_v3":          encLeaveGroup(nil, 13, gClient, gGroup, []string{gMember, gOther}),
		"offset_commit_v8":        encOffsetCommit(nil, 14, gClient, gGroup, 3, gMember, commit),
		"offset_commit_v8_simple": encOffsetCommit(nil, 15, gClient, gGroup, -1, "", commit),
		"offset_fetch_v8":         encOffsetFetch(nil, 16, gClient, gGroup, []FetchTopic{{gTopic, []int32{0, 1, 2}}}),
		"create_topics_v5":        encCreateTopics(nil, 17, gClient, []string{gTopic}, 100, 30000),
	}
	// The hot-path commit encoder used by the commit workload.
	e := beginRequest(nil, apiOffsetCommit, 8, 14, gClient)
	ours["offset_commit_v8_hot"] = encOffsetCommitInto(e, gGroup, 3, gMember, gTopic, commit[0].Partitions)
	g.Requests["offset_commit_v8_hot"] = g.Requests["offset_commit_v8"]
	for name, want := range g.Requests {
		got, ok := ours[name]
		if !ok {
			t.Errorf("%s: no Go encoding", name)
			continue
		}
		if !bytes.Equal(got, unhex(t, want)) {
			t.Errorf("%s:\n got %x\nwant %s", name, got, want)
		}
	}
	for name := range ours {
		if _, ok := g.Requests[name]; !ok {
			t.Errorf("%s: no golden vector", name)
		}
	}
}

func resp(t *testing.T, g golden, name string, api, version int16) *Dec {
	raw := unhex(t, g.Responses[name])
	if len(raw) < 8 {
		t.Fatalf("%s: missing", name)
	}
	d, _ := responseBody(raw[4:], api, version)
	return d
}

func TestResponsesDecode(t *testing.T) {
	g := loadGolden(t)
	av, err := decApiVersions(resp(t, g, "api_versions_v3", apiApiVersions, 3))
	if err != nil || av.ErrorCode != 0 || av.Versions[11] != [2]int16{0, 9} || av.Versions[12] != [2]int16{0, 4} {
		t.Errorf("api versions: %+v %v", av, err)
	}
	for _, v := range []int16{3, 4} {
		name := "find_coordinator_v3"
		if v == 4 {
			name = "find_coordinator_v4"
		}
		fc, err := decFindCoordinator(resp(t, g, name, apiFindCoordinator, v), v)
		if err != nil || fc != (FindCoordinatorResp{0, 5, "127.0.0.1", 9092}) {
			t.Errorf("%s: %+v %v", name, fc, err)
		}
	}
	for _, v := range []int16{5, 9} {
		name := "join_group_v5_leader"
		if v == 9 {
			name = "join_group_v9_leader"
		}
		d := resp(t, g, name, apiJoinGroup, v)
		jr, err := decJoinGroup(d, v)
		if err != nil || jr.ErrorCode != 0 || jr.GenerationID != 3 || jr.ProtocolName != "range" || jr.Leader != gMember ||
			jr.MemberID != gMember || len(jr.Members) != 2 || jr.Members[1].MemberID != gOther ||
			!bytes.Equal(jr.Members[0].Metadata, seq(0, 20)) || d.pos != len(d.b) {
			t.Errorf("%s: %+v %v", name, jr, err)
		}
	}
	jr, err := decJoinGroup(resp(t, g, "join_group_v9_required", apiJoinGroup, 9), 9)
	if err != nil || jr.ErrorCode != errMemberIDRequired || jr.MemberID != gMember || jr.GenerationID != -1 {
		t.Errorf("join required: %+v %v", jr, err)
	}
	for _, v := range []int16{3, 5} {
		name := "sync_group_v3"
		if v == 5 {
			name = "sync_group_v5"
		}
		sr, err := decSyncGroup(resp(t, g, name, apiSyncGroup, v), v)
		if err != nil || sr.ErrorCode != 0 || !bytes.Equal(sr.Assignment, seq(7, 19)) {
			t.Errorf("%s: %+v %v", name, sr, err)
		}
	}
	for _, v := range []int16{3, 4} {
		name := "heartbeat_v3"
		if v == 4 {
			name = "heartbeat_v4"
		}
		ec, err := decHeartbeat(resp(t, g, name, apiHeartbeat, v))
		if err != nil || ec != errRebalanceInProgress {
			t.Errorf("%s: %d %v", name, ec, err)
		}
	}
	lr, err := decLeaveGroup(resp(t, g, "leave_group_v3", apiLeaveGroup, 3))
	if err != nil || lr.ErrorCode != 0 || len(lr.MemberErrors) != 2 || lr.MemberErrors[1] != errUnknownMemberID {
		t.Errorf("leave: %+v %v", lr, err)
	}
	n, ec, err := decOffsetCommit(resp(t, g, "offset_commit_v8", apiOffsetCommit, 8))
	if err != nil || n != 3 || ec != errUnknownTopicPartition {
		t.Errorf("commit: %d %d %v", n, ec, err)
	}
	offs, n, ec, err := decOffsetFetch(resp(t, g, "offset_fetch_v8", apiOffsetFetch, 8), true)
	if err != nil || n != 3 || ec != 0 || len(offs) != 3 || offs[2] != (FetchedOffset{gTopic, 2, 1002, 0}) {
		t.Errorf("fetch: %+v %d %d %v", offs, n, ec, err)
	}
	ct, err := decCreateTopics(resp(t, g, "create_topics_v5", apiCreateTopics, 5))
	if err != nil || ct[gTopic] != errTopicAlreadyExists {
		t.Errorf("create topics: %v %v", ct, err)
	}
}

func TestConsumerProtocolRoundTrip(t *testing.T) {
	a := assignment("t", []int32{1, 5, 9})
	got, err := decodeAssignment(a)
	if err != nil || len(got["t"]) != 3 || got["t"][2] != 9 {
		t.Errorf("assignment: %v %v", got, err)
	}
}

func TestPercentile(t *testing.T) {
	xs := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if pct(xs, 50) != 5 || pct(xs, 99) != 10 || pct(xs, 0) != 1 {
		t.Errorf("pct: %d %d %d", pct(xs, 50), pct(xs, 99), pct(xs, 0))
	}
}
