package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Common options of every workload.
type Common struct {
	Addr       string
	ServerPID  int
	Versions   Versions
	Tag        string // makes group ids unique per run
	SessionMs  int32
	RebalMs    int32
	SetupConc  int
	SetupLimit time.Duration
	// Connect to the address FindCoordinator answers for each connection's group (several nodes).
	FollowCoordinator bool
}

func (c *Common) dialHandshake(clientID, group string) (*Conn, error) {
	conn, err := dial(c.Addr, clientID, 10*time.Second)
	if err != nil {
		return nil, err
	}
	need := c.Versions.need()
	need[apiOffsetCommit] = 8
	need[apiOffsetFetch] = 8
	coordinator, err := conn.handshake(group, c.Versions.FindCoordinator, need, time.Now().Add(30*time.Second))
	// Several nodes: a shard being handed over has no coordinator for a moment (retriable).
	for retry := 0; err != nil && c.FollowCoordinator && isRetriableCoordinatorErr(err) && retry < 100; retry++ {
		time.Sleep(100 * time.Millisecond)
		coordinator, err = conn.handshake(group, c.Versions.FindCoordinator, need, time.Now().Add(30*time.Second))
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	if !c.FollowCoordinator || coordinator == "" || coordinator == c.Addr {
		return conn, nil
	}
	// Several nodes: the group's requests go to its coordinator, as a real client's do.
	conn.Close()
	if conn, err = dial(coordinator, clientID, 10*time.Second); err != nil {
		return nil, err
	}
	if _, err := conn.handshake(group, c.Versions.FindCoordinator, need, time.Now().Add(30*time.Second)); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// dialMany opens n handshaken connections with bounded concurrency.
func (c *Common) dialMany(n int, prefix string, groupOf func(i int) string) ([]*Conn, error) {
	conns := make([]*Conn, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		i := i
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			g := ""
			if groupOf != nil {
				g = groupOf(i)
			}
			conns[i], errs[i] = c.dialHandshake(fmt.Sprintf("%s-%d", prefix, i), g)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, cn := range conns {
				if cn != nil {
					cn.Close()
				}
			}
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
	}
	return conns, nil
}

func closeAll(conns []*Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

func (c *Common) createTopic(name string, partitions int32) error {
	conn, err := c.dialHandshake("bench-admin", "")
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.createTopics([]string{name}, partitions, time.Now().Add(60*time.Second))
}

// setupGroups makes each group hold one synced member, joined on its own short-lived
// connection (up to SetupConc at once). Returns the members (connections closed).
func (c *Common) setupGroups(groups []string, topic string, partitions int32) ([]*Member, error) {
	members := make([]*Member, len(groups))
	errs := make([]error, len(groups))
	sem := make(chan struct{}, c.SetupConc)
	var wg sync.WaitGroup
	deadline := time.Now().Add(c.SetupLimit)
	for i, g := range groups {
		i, g := i, g
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			conn, err := c.dialHandshake(fmt.Sprintf("setup-%d", i), g)
			if err != nil {
				errs[i] = err
				return
			}
			defer conn.Close()
			cfg := &MemberCfg{Group: g, SessionMs: c.SessionMs, RebalanceMs: c.RebalMs, V: c.Versions, Topic: topic, Partitions: partitions}
			cfg.init()
			m := &Member{c: conn, cfg: cfg, Coord: conn.addr}
			errs[i] = m.joinAndSync(deadline)
			m.c = nil
			members[i] = m
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("setting up group %s: %w", groups[i], err)
		}
	}
	return members, nil
}

// ---- rebalance -------------------------------------------------------------------------

type RebalanceOpts struct {
	Members      int
	Iterations   int
	Budget       time.Duration
	PhaseTimeout time.Duration
	HBInterval   time.Duration
	Rejoin       bool
}

type evKind int

const (
	evJoined evKind = iota
	evSynced
	evFailed
)

type event struct {
	idx   int
	kind  evKind
	gen   int32
	count int // members in the leader's JoinGroup response, -1 for followers
	at    time.Time
	err   error
}

// groupRun tracks the members of one group through rebalances.
type groupRun struct {
	c          *Common
	opts       RebalanceOpts
	cfg        *MemberCfg
	conns      []*Conn
	events     chan event
	stop       chan struct{}
	wg         sync.WaitGroup
	firstSent  []int64 // ns, per member
	members    []*Member
	synced     []int32
	countAt    map[int32]int
	leaderCnt  map[int32]int
	joinAt     []time.Time
	maxGen     int32
	failures   []string
	membersOut int
}

func (g *groupRun) startMember(idx int, deadline time.Time) {
	m := &Member{c: g.conns[idx], cfg: g.cfg}
	g.members[idx] = m
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		stopped := func() bool {
			select {
			case <-g.stop:
				return true
			default:
				return false
			}
		}
		fail := func(err error) {
			if !stopped() {
				g.events <- event{idx: idx, kind: evFailed, err: err}
			}
		}
		first := true
		for {
			var sentCb func()
			if first {
				sentCb = func() { atomic.StoreInt64(&g.firstSent[idx], time.Now().UnixNano()) }
				first = false
			}
			if err := m.join(deadline, sentCb); err != nil {
				fail(err)
				return
			}
			cnt := -1
			if m.Leader {
				cnt = len(m.Members)
			}
			g.events <- event{idx: idx, kind: evJoined, gen: m.Generation, count: cnt, at: time.Now()}
			ec, err := m.sync(deadline)
			if err != nil {
				fail(err)
				return
			}
			if ec != errNone {
				if !rejoinable(ec) {
					fail(ErrCode{apiSyncGroup, ec})
					return
				}
				if ec == errUnknownMemberID {
					m.ID = ""
				}
				continue
			}
			g.events <- event{idx: idx, kind: evSynced, gen: m.Generation, at: time.Now()}
			for {
				select {
				case <-g.stop:
					return
				case <-time.After(g.opts.HBInterval):
				}
				ec, err := m.heartbeat(deadline)
				if err != nil {
					fail(err)
					return
				}
				if ec == errNone {
					continue
				}
				if !rejoinable(ec) {
					fail(ErrCode{apiHeartbeat, ec})
					return
				}
				if ec == errUnknownMemberID {
					m.ID = ""
				}
				break
			}
		}
	}()
}

// waitStable consumes events until target members are synced in one generation whose
// leader saw target members. Returns the completion time.
func (g *groupRun) waitStable(target int, timeout time.Duration) (time.Time, bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return time.Now(), false
		case e := <-g.events:
			switch e.kind {
			case evFailed:
				g.failures = append(g.failures, fmt.Sprintf("member %d: %v", e.idx, e.err))
				if len(g.failures) > 0 {
					return time.Now(), false
				}
			case evJoined:
				g.joinAt[e.idx] = e.at
				if e.count >= 0 {
					g.leaderCnt[e.gen] = e.count
				}
				if e.gen > g.maxGen {
					g.maxGen = e.gen
				}
			case evSynced:
				if prev := g.synced[e.idx]; prev >= 0 {
					g.countAt[prev]--
				}
				g.synced[e.idx] = e.gen
				g.countAt[e.gen]++
				if g.leaderCnt[e.gen] == target && g.countAt[e.gen] == target {
					return e.at, true
				}
			}
		}
	}
}

func (g *groupRun) shutdown() {
	close(g.stop)
	closeAll(g.conns)
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			return
		case <-g.events:
		}
	}
}

// leaveAll removes the members (LeaveGroup v3) so their sessions do not linger.
func (g *groupRun) leaveAll() {
	var ids []string
	for _, m := range g.members {
		if m != nil && m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	conn, err := g.c.dialHandshake("bench-cleanup", "")
	if err != nil {
		return
	}
	defer conn.Close()
	for start := 0; start < len(ids); start += 500 {
		end := start + 500
		if end > len(ids) {
			end = len(ids)
		}
		frame := encLeaveGroup(conn.wbuf, conn.nextCorr(), conn.clientID, g.cfg.Group, ids[start:end])
		if _, err := conn.roundTrip(frame, apiLeaveGroup, 3, time.Now().Add(30*time.Second)); err != nil {
			return
		}
	}
}

func runRebalance(c *Common, o RebalanceOpts) ([]Result, error) {
	var joinTimes, rejoinTimes []float64
	var joinLat []int64
	var gens []int32
	joinRes := Result{Name: fmt.Sprintf("rebalance-join-%d", o.Members), Done: true, Extra: map[string]any{}}
	rejoinRes := Result{Name: fmt.Sprintf("rebalance-rejoin-%d", o.Members), Done: true, Extra: map[string]any{}}
	var joinCPU, rejoinCPU, joinSched, rejoinSched, joinSecs, rejoinSecs float64
	budgetEnd := time.Now().Add(o.Budget)
	for it := 0; it < o.Iterations; it++ {
		if it > 0 && time.Now().After(budgetEnd) {
			break
		}
		group := fmt.Sprintf("rb-%s-%d-%d", c.Tag, o.Members, it)
		cfg := &MemberCfg{Group: group, SessionMs: c.SessionMs, RebalanceMs: c.RebalMs, V: c.Versions, Topic: "bench-rebalance", Partitions: 64}
		cfg.init()
		n := o.Members
		extra := 0
		if o.Rejoin {
			extra = 1
		}
		conns, err := c.dialMany(n+extra, "member", func(int) string { return group })
		if err != nil {
			return nil, err
		}
		g := &groupRun{c: c, opts: o, cfg: cfg, conns: conns, events: make(chan event, 4*(n+1)), stop: make(chan struct{}),
			firstSent: make([]int64, n+1), members: make([]*Member, n+1), synced: make([]int32, n+1),
			countAt: map[int32]int{}, leaderCnt: map[int32]int{}, joinAt: make([]time.Time, n+1)}
		for i := range g.synced {
			g.synced[i] = -1
		}
		deadline := time.Now().Add(o.PhaseTimeout * 3)
		meter := startMeter(c.ServerPID)
		for i := 0; i < n; i++ {
			g.startMember(i, deadline)
		}
		doneAt, ok := g.waitStable(n, o.PhaseTimeout)
		var r Result
		meter.stop(&r)
		joinCPU += r.ServerCPUS
		joinSched += r.ServerSchedCPUS
		joinSecs += r.Seconds
		first := int64(0)
		for i := 0; i < n; i++ {
			t := atomic.LoadInt64(&g.firstSent[i])
			if t > 0 && (first == 0 || t < first) {
				first = t
			}
		}
		if !ok {
			joinRes.Done = false
			synced := 0
			for i := 0; i < n; i++ {
				if g.synced[i] >= 0 {
					synced++
				}
			}
			joinRes.Note = fmt.Sprintf("iteration %d: not stable after %s (%d/%d members synced, max generation %d) %s",
				it, o.PhaseTimeout, synced, n, g.maxGen, strings.Join(g.failures, "; "))
			g.shutdown()
			g.leaveAll()
			break
		}
		joinTimes = append(joinTimes, float64(doneAt.UnixNano()-first)/1e6)
		gens = append(gens, g.synced[0])
		for i := 0; i < n; i++ {
			joinLat = append(joinLat, g.joinAt[i].UnixNano()-atomic.LoadInt64(&g.firstSent[i]))
		}
		if o.Rejoin {
			meter = startMeter(c.ServerPID)
			g.startMember(n, deadline)
			doneAt, ok = g.waitStable(n+1, o.PhaseTimeout)
			var r2 Result
			meter.stop(&r2)
			rejoinCPU += r2.ServerCPUS
			rejoinSched += r2.ServerSchedCPUS
			rejoinSecs += r2.Seconds
			if !ok {
				rejoinRes.Done = false
				rejoinRes.Note = fmt.Sprintf("iteration %d: %d+1 not stable after %s %s", it, n, o.PhaseTimeout, strings.Join(g.failures, "; "))
			} else {
				rejoinTimes = append(rejoinTimes, float64(doneAt.UnixNano()-atomic.LoadInt64(&g.firstSent[n]))/1e6)
			}
		}
		g.shutdown()
		g.leaveAll()
		if !ok {
			break
		}
	}
	joinRes.Ops = int64(len(joinTimes))
	joinRes.Units = joinRes.Ops
	joinRes.ServerCPUS, joinRes.ServerSchedCPUS, joinRes.Seconds = joinCPU, joinSched, joinSecs
	joinRes.setLatencies(joinLat)
	joinRes.Extra["times_ms"] = joinTimes
	joinRes.Extra["median_ms"] = median(joinTimes)
	joinRes.Extra["generations"] = gens
	results := []Result{joinRes}
	if o.Rejoin {
		rejoinRes.Ops = int64(len(rejoinTimes))
		rejoinRes.Units = rejoinRes.Ops
		rejoinRes.ServerCPUS, rejoinRes.ServerSchedCPUS, rejoinRes.Seconds = rejoinCPU, rejoinSched, rejoinSecs
		rejoinRes.Extra["times_ms"] = rejoinTimes
		rejoinRes.Extra["median_ms"] = median(rejoinTimes)
		results = append(results, rejoinRes)
	}
	return results, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return -1
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ---- heartbeat -------------------------------------------------------------------------

type PipeOpts struct {
	Conns    int
	Inflight int
	Duration time.Duration
	MaxOps   int64
}

func runHeartbeat(c *Common, groups int, po PipeOpts) ([]Result, error) {
	names := make([]string, groups)
	for i := range names {
		names[i] = fmt.Sprintf("hb-%s-%d", c.Tag, i)
	}
	members, err := c.setupGroups(names, "bench-heartbeat", 1)
	if err != nil {
		return nil, err
	}
	// Each connection heartbeats the groups of one coordinator (one node: every group).
	byCoord := map[string][]*Member{}
	var coords []string
	for _, m := range members {
		if _, seen := byCoord[m.Coord]; !seen {
			coords = append(coords, m.Coord)
		}
		byCoord[m.Coord] = append(byCoord[m.Coord], m)
	}
	if po.Conns < len(coords) {
		return nil, fmt.Errorf("%d connections for %d coordinators", po.Conns, len(coords))
	}
	conns, err := c.dialMany(po.Conns, "heartbeat", func(i int) string { return byCoord[coords[i%len(coords)]][0].cfg.Group })
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)
	v := c.Versions.Heartbeat
	templates := make([][][]byte, po.Conns)
	for k, addr := range coords {
		var mine []int // the connections of this coordinator
		for ci := k; ci < po.Conns; ci += len(coords) {
			mine = append(mine, ci)
		}
		for i, m := range byCoord[addr] {
			ci := mine[i%len(mine)]
			templates[ci] = append(templates[ci], encHeartbeat(nil, 0, conns[ci].clientID, v, m.cfg.Group, m.Generation, m.ID))
		}
	}
	res := Result{Name: "heartbeat"}
	meter := startMeter(c.ServerPID)
	out := runPipe(PipeSpec{
		Conns: conns, Inflight: po.Inflight, Duration: po.Duration, MaxOps: po.MaxOps, API: apiHeartbeat, Version: v,
		Next: func(ci int, seq int64, buf []byte) []byte {
			t := templates[ci]
			return append(buf, t[seq%int64(len(t))]...)
		},
		Check: func(ci int, d *Dec) (int, int16, error) {
			ec, err := decHeartbeat(d)
			return 1, ec, err
		},
	})
	meter.stop(&res)
	out.into(&res)
	res.finishRates()
	return []Result{res}, nil
}

// ---- commit / fetch --------------------------------------------------------------------

func runCommit(c *Common, po PipeOpts, partitionCounts []int, modes []string) ([]Result, error) {
	const topic = "bench-commit"
	maxP := 0
	for _, p := range partitionCounts {
		if p > maxP {
			maxP = p
		}
	}
	if err := c.createTopic(topic, int32(maxP)); err != nil {
		return nil, err
	}
	var results []Result
	simpleGroups := func(i int) string { return fmt.Sprintf("cs-%s-%d", c.Tag, i) }
	memberGroups := func(i int) string { return fmt.Sprintf("cm-%s-%d", c.Tag, i) }
	for _, mode := range modes {
		groupOf := simpleGroups
		if mode == "member" {
			groupOf = memberGroups
		}
		conns, err := c.dialMany(po.Conns, "commit", groupOf)
		if err != nil {
			return nil, err
		}
		gens := make([]int32, po.Conns)
		ids := make([]string, po.Conns)
		for i := range gens {
			gens[i] = -1
		}
		if mode == "member" {
			errs := make([]error, po.Conns)
			var wg sync.WaitGroup
			for i := range conns {
				i := i
				wg.Add(1)
				go func() {
					defer wg.Done()
					cfg := &MemberCfg{Group: groupOf(i), SessionMs: c.SessionMs, RebalanceMs: c.RebalMs, V: c.Versions, Topic: topic, Partitions: int32(maxP)}
					cfg.init()
					m := &Member{c: conns[i], cfg: cfg}
					errs[i] = m.joinAndSync(time.Now().Add(c.SetupLimit))
					gens[i], ids[i] = m.Generation, m.ID
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					closeAll(conns)
					return nil, err
				}
			}
		}
		for _, np := range partitionCounts {
			parts := make([]int32, np)
			for i := range parts {
				parts[i] = int32(i)
			}
			bufs := make([][]CommitPartition, po.Conns)
			for i := range bufs {
				bufs[i] = make([]CommitPartition, np)
			}
			np := np
			res := Result{Name: fmt.Sprintf("commit-%s-%dp", mode, np)}
			meter := startMeter(c.ServerPID)
			out := runPipe(PipeSpec{
				Conns: conns, Inflight: po.Inflight, Duration: po.Duration, MaxOps: po.MaxOps, API: apiOffsetCommit, Version: 8,
				Next: func(ci int, seq int64, buf []byte) []byte {
					ps := bufs[ci]
					base := int32(0)
					if np == 1 {
						base = int32(seq % int64(maxP))
					}
					for i := range ps {
						ps[i] = CommitPartition{base + int32(i), seq + 1}
					}
					e := beginRequest(buf[len(buf):], apiOffsetCommit, 8, 0, conns[ci].clientID)
					frame := encOffsetCommitInto(e, groupOf(ci), gens[ci], ids[ci], topic, ps)
					return append(buf, frame...)
				},
				Check: func(ci int, d *Dec) (int, int16, error) {
					n, ec, err := decOffsetCommit(d)
					return n, ec, err
				},
			})
			meter.stop(&res)
			out.into(&res)
			res.finishRates()
			results = append(results, res)
		}
		if mode == "simple" {
			// OffsetFetch of the offsets just committed by the simple consumers.
			for _, np := range partitionCounts {
				parts := make([]int32, np)
				for i := range parts {
					parts[i] = int32(i)
				}
				np := np
				res := Result{Name: fmt.Sprintf("fetch-%dp", np)}
				meter := startMeter(c.ServerPID)
				single := make([][]int32, maxP)
				for p := range single {
					single[p] = []int32{int32(p)}
				}
				out := runPipe(PipeSpec{
					Conns: conns, Inflight: po.Inflight, Duration: po.Duration, MaxOps: po.MaxOps, API: apiOffsetFetch, Version: 8,
					Next: func(ci int, seq int64, buf []byte) []byte {
						ps := parts
						if np == 1 {
							ps = single[seq%int64(maxP)]
						}
						return append(buf, encOffsetFetch(buf[len(buf):], 0, conns[ci].clientID, groupOf(ci), []FetchTopic{{topic, ps}})...)
					},
					Check: func(ci int, d *Dec) (int, int16, error) {
						_, n, ec, err := decOffsetFetch(d, false)
						if err == nil && n != np {
							err = fmt.Errorf("OffsetFetch answered %d partitions, %d asked", n, np)
						}
						return n, ec, err
					},
				})
				meter.stop(&res)
				out.into(&res)
				res.finishRates()
				results = append(results, res)
			}
		}
		closeAll(conns)
	}
	return results, nil
}

func encOffsetCommitInto(e *Enc, group string, generation int32, memberID, topic string, ps []CommitPartition) []byte {
	e.str(group)
	e.i32(generation)
	e.str(memberID)
	e.nstr(nil)
	e.arrayLen(1)
	e.str(topic)
	e.arrayLen(len(ps))
	for _, p := range ps {
		e.i32(p.Partition)
		e.i64(p.Offset)
		e.i32(-1)
		e.uvarint(1) // metadata "" (compact string)
		e.tags()
	}
	e.tags()
	e.tags()
	return e.finish()
}

// ---- groups ----------------------------------------------------------------------------

func runGroups(c *Common, groups, conns, offsets int, budget time.Duration) ([]Result, error) {
	const topic = "bench-groups"
	if err := c.createTopic(topic, int32(offsets)); err != nil {
		return nil, err
	}
	cs, err := c.dialMany(conns, "groups", nil)
	if err != nil {
		return nil, err
	}
	defer closeAll(cs)
	parts := make([]int32, offsets)
	for i := range parts {
		parts[i] = int32(i)
	}
	var next int64 = -1
	deadline := time.Now().Add(budget)
	lats := make([][]int64, conns)
	fails := make([]string, conns)
	errCounts := make([]map[int16]int64, conns)
	res := Result{Name: "groups", Extra: map[string]any{}}
	time.Sleep(200 * time.Millisecond)
	meter := startMeter(c.ServerPID)
	var wg sync.WaitGroup
	for w := 0; w < conns; w++ {
		w := w
		wg.Add(1)
		go func() {
			defer wg.Done()
			errCounts[w] = map[int16]int64{}
			for {
				i := atomic.AddInt64(&next, 1)
				if i >= int64(groups) || time.Now().After(deadline) {
					return
				}
				t0 := time.Now()
				// A group started before the budget ran out may finish after it (a slow server
				// answers JoinGroup late); it gets its own generous limit.
				limit := t0.Add(c.SetupLimit)
				cfg := &MemberCfg{Group: fmt.Sprintf("gr-%s-%d", c.Tag, i), SessionMs: c.SessionMs, RebalanceMs: c.RebalMs, V: c.Versions, Topic: topic, Partitions: int32(offsets)}
				cfg.init()
				m := &Member{c: cs[w], cfg: cfg}
				if err := m.joinAndSync(limit); err != nil {
					fails[w] = fmt.Sprintf("group %d: %v", i, err)
					return
				}
				ec, err := m.commit(topic, parts, i+1, limit)
				if err != nil {
					fails[w] = fmt.Sprintf("group %d commit: %v", i, err)
					return
				}
				if ec != 0 {
					errCounts[w][ec]++
				}
				lats[w] = append(lats[w], time.Since(t0).Nanoseconds())
			}
		}()
	}
	wg.Wait()
	meter.stop(&res)
	var all []int64
	for w := range lats {
		all = append(all, lats[w]...)
		for k, v := range errCounts[w] {
			res.addError(k, v)
		}
		if fails[w] != "" && res.Note == "" {
			res.Note = fails[w]
		}
	}
	res.Ops = int64(len(all))
	res.Units = res.Ops
	res.setLatencies(all)
	res.finishRates()
	res.Done = res.Ops == int64(groups) && res.Note == ""
	if res.Ops < int64(groups) && res.Note == "" {
		res.Note = fmt.Sprintf("time budget %s reached after %d of %d groups", budget, res.Ops, groups)
	}
	// RSS once the groups are idle.
	time.Sleep(1 * time.Second)
	idle := sampleProc(c.ServerPID)
	res.Extra["rss_idle_kb"] = idle.RSSKB
	if res.Ops > 0 && idle.RSSKB > 0 {
		res.Extra["rss_per_group_bytes"] = float64(idle.RSSKB-res.RSSBeforeKB) * 1024 / float64(res.Ops)
	}
	return []Result{res}, nil
}

// ---- verify (restart) ------------------------------------------------------------------

// runVerify fetches the offsets of a few groups and checks them against expectations:
// group prefix-i holds offset i+1 on partitions 0..n-1 of topic.
func runVerify(c *Common, prefix, topic string, groups []int, partitions int) ([]Result, error) {
	conn, err := c.dialHandshake("bench-verify", "")
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ps := make([]int32, partitions)
	for i := range ps {
		ps[i] = int32(i)
	}
	res := Result{Name: "verify", Done: true}
	for _, i := range groups {
		g := fmt.Sprintf("%s%d", prefix, i)
		var offs []FetchedOffset
		var ec int16
		for limit := time.Now().Add(120 * time.Second); ; {
			d, err := conn.roundTrip(encOffsetFetch(conn.wbuf, conn.nextCorr(), conn.clientID, g, []FetchTopic{{topic, ps}}), apiOffsetFetch, 8, time.Now().Add(30*time.Second))
			if err != nil {
				return nil, err
			}
			offs, _, ec, err = decOffsetFetch(d, true)
			if err != nil {
				return nil, err
			}
			// Still loading: ask again (a client retries COORDINATOR_LOAD_IN_PROGRESS too).
			if ec != errCoordinatorLoading || time.Now().After(limit) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		res.Ops++
		if ec != 0 {
			res.addError(ec, 1)
		}
		for _, o := range offs {
			if o.Offset != int64(i+1) {
				res.Done = false
				res.Note = fmt.Sprintf("group %s partition %d: offset %d, expected %d", g, o.Partition, o.Offset, i+1)
			}
		}
	}
	return []Result{res}, nil
}
