// Command loadgen is the benchmark's load generator: a Kafka group-protocol client written
// with the Go standard library only. Each run prints one JSON object on stdout.
//
//	loadgen <rebalance|heartbeat|commit|groups|verify> -addr 127.0.0.1:9092 [-server-pid PID] [flags]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

type Output struct {
	Workload string    `json:"workload"`
	Addr     string    `json:"addr"`
	Results  []Result  `json:"results"`
	Error    string    `json:"error,omitempty"`
	Started  time.Time `json:"started"`
}

func intList(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			v, err := strconv.Atoi(f)
			if err != nil {
				fatal(fmt.Errorf("bad integer %q", f))
			}
			out = append(out, v)
		}
	}
	return out
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		fatal(fmt.Errorf("usage: loadgen <rebalance|heartbeat|commit|groups|verify> [flags]"))
	}
	workload := os.Args[1]
	fs := flag.NewFlagSet(workload, flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:9092", "server address (loopback only)")
	pid := fs.Int("server-pid", 0, "server process id, for CPU time and RSS from /proc")
	versions := fs.String("versions", "modern", "modern (JoinGroup v9, SyncGroup v5, Heartbeat v4, FindCoordinator v4) or legacy (v5, v3, v3, v3)")
	tag := fs.String("tag", strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36), "suffix making group ids unique")
	sessionMs := fs.Int("session-ms", 45000, "session timeout of the members (Java consumer default)")
	rebalMs := fs.Int("rebalance-ms", 300000, "rebalance timeout of the members (Java max.poll.interval.ms default)")
	setupConc := fs.Int("setup-concurrency", 500, "groups set up at once (each on its own connection)")
	setupLimit := fs.Duration("setup-timeout", 120*time.Second, "time limit for setting up groups")
	measure := fs.String("measure-pids", "", "comma-separated process ids whose CPU time each phase reports (extra.pid_cpu_s)")
	follow := fs.Bool("follow-coordinator", false, "connect each group's connection to the coordinator FindCoordinator answers (several nodes)")
	// rebalance
	members := fs.Int("members", 10, "rebalance: members joining the group")
	iterations := fs.Int("iterations", 1, "rebalance: fresh groups to run (within -budget)")
	budget := fs.Duration("budget", 60*time.Second, "rebalance: no new iteration after this; groups: stop creating after this")
	phaseTimeout := fs.Duration("phase-timeout", 90*time.Second, "rebalance: give up on a phase after this")
	hbInterval := fs.Duration("heartbeat-interval", 100*time.Millisecond, "rebalance: heartbeat interval of synced members")
	rejoin := fs.Bool("rejoin", true, "rebalance: then add one member to the stable group and time the re-join")
	// pipelined
	conns := fs.Int("conns", 16, "heartbeat/commit: connections")
	inflight := fs.Int("inflight", 8, "heartbeat/commit: requests in flight per connection")
	duration := fs.Duration("duration", 5*time.Second, "heartbeat/commit: measuring time per phase")
	maxOps := fs.Int64("max-ops", 5_000_000, "heartbeat/commit: request cap per phase")
	groups := fs.Int("groups", 1000, "heartbeat: stable groups; groups: groups to create")
	partitions := fs.String("partitions", "1,100", "commit: partitions per request")
	modes := fs.String("modes", "simple,member", "commit: simple (generation -1) and/or member")
	offsets := fs.Int("offsets", 3, "groups: offsets committed per group")
	// verify
	prefix := fs.String("prefix", "rs-", "verify: group id prefix")
	topic := fs.String("topic", "bench-restart", "verify: topic")
	verifyGroups := fs.String("verify-groups", "0,1,99999", "verify: group numbers")
	_ = fs.Parse(os.Args[2:])

	if !strings.HasPrefix(*addr, "127.0.0.1:") && !strings.HasPrefix(*addr, "localhost:") {
		fatal(fmt.Errorf("refusing non-loopback address %s", *addr))
	}
	if *measure != "" {
		measuredPIDs = intList(*measure)
	}
	c := &Common{Addr: *addr, ServerPID: *pid, Tag: *tag, SessionMs: int32(*sessionMs), RebalMs: int32(*rebalMs),
		SetupConc: *setupConc, SetupLimit: *setupLimit, FollowCoordinator: *follow}
	switch *versions {
	case "modern":
		c.Versions = modernVersions
	case "legacy":
		c.Versions = legacyVersions
	default:
		fatal(fmt.Errorf("unknown -versions %q", *versions))
	}
	po := PipeOpts{Conns: *conns, Inflight: *inflight, Duration: *duration, MaxOps: *maxOps}
	out := Output{Workload: workload, Addr: *addr, Started: time.Now()}
	var results []Result
	var err error
	switch workload {
	case "rebalance":
		results, err = runRebalance(c, RebalanceOpts{Members: *members, Iterations: *iterations, Budget: *budget,
			PhaseTimeout: *phaseTimeout, HBInterval: *hbInterval, Rejoin: *rejoin})
	case "heartbeat":
		results, err = runHeartbeat(c, *groups, po)
	case "commit":
		results, err = runCommit(c, po, intList(*partitions), strings.Split(*modes, ","))
	case "groups":
		results, err = runGroups(c, *groups, *conns, *offsets, *budget)
	case "verify":
		results, err = runVerify(c, *prefix, *topic, intList(*verifyGroups), *offsets)
	default:
		fatal(fmt.Errorf("unknown workload %q", workload))
	}
	out.Results = results
	if err != nil {
		out.Error = err.Error()
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	_ = enc.Encode(out)
	if err != nil {
		os.Exit(1)
	}
}
