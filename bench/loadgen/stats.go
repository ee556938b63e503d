package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// clkTck is USER_HZ, 100 on every Linux architecture the kernel exports to user space.
const clkTck = 100

// ProcSample is a reading of a process's CPU time and resident memory.
type ProcSample struct {
	CPUTicks int64 // utime + stime from /proc/PID/stat, all threads including exited ones
	RSSKB    int64 // VmRSS from /proc/PID/status
	At       time.Time
}

func sampleProc(pid int) ProcSample {
	s := ProcSample{At: time.Now(), CPUTicks: -1, RSSKB: -1}
	if pid <= 0 {
		return s
	}
	if raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		text := string(raw)
		if i := strings.LastIndexByte(text, ')'); i >= 0 {
			f := strings.Fields(text[i+1:])
			// f[0] is field 3 (state); utime is field 14, stime field 15.
			if len(f) > 12 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				st, _ := strconv.ParseInt(f[12], 10, 64)
				s.CPUTicks = u + st
			}
		}
	}
	if raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				f := strings.Fields(line)
				if len(f) >= 2 {
					s.RSSKB, _ = strconv.ParseInt(f[1], 10, 64)
				}
			}
		}
	}
	return s
}

// threadCPUNs sums the on-CPU nanoseconds of a process's live threads (/proc/PID/task/*/schedstat).
func threadCPUNs(pid int) int64 {
	if pid <= 0 {
		return -1
	}
	paths, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total int64
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := strings.Fields(string(raw))
		if len(f) > 0 {
			v, _ := strconv.ParseInt(f[0], 10, 64)
			total += v
		}
	}
	return total
}

// Meter measures a phase: wall time, server and generator CPU, server RSS.
type Meter struct {
	serverPID  int
	start      ProcSample
	startSched int64
	self       ProcSample
	others     []ProcSample // of measuredPIDs
}

// measuredPIDs are further processes whose CPU time each phase reports in Extra["pid_cpu_s"]
// (-measure-pids: several nodes, the database's processes).
var measuredPIDs []int

func startMeter(serverPID int) *Meter {
	m := &Meter{serverPID: serverPID, start: sampleProc(serverPID), startSched: threadCPUNs(serverPID), self: sampleProc(os.Getpid())}
	m.others = make([]ProcSample, len(measuredPIDs))
	for i, pid := range measuredPIDs {
		m.others[i] = sampleProc(pid)
	}
	return m
}

// stop fills the common fields of a result.
func (m *Meter) stop(r *Result) {
	end := sampleProc(m.serverPID)
	endSched := threadCPUNs(m.serverPID)
	self := sampleProc(os.Getpid())
	r.Seconds = end.At.Sub(m.start.At).Seconds()
	if m.start.CPUTicks >= 0 && end.CPUTicks >= 0 {
		r.ServerCPUS = float64(end.CPUTicks-m.start.CPUTicks) / clkTck
	}
	if m.startSched >= 0 && endSched >= 0 {
		r.ServerSchedCPUS = float64(endSched-m.startSched) / 1e9
	}
	r.GenCPUS = float64(self.CPUTicks-m.self.CPUTicks) / clkTck
	r.RSSBeforeKB = m.start.RSSKB
	r.RSSAfterKB = end.RSSKB
	if len(measuredPIDs) > 0 {
		cpu := map[string]float64{}
		for i, pid := range measuredPIDs {
			if now := sampleProc(pid); now.CPUTicks >= 0 && m.others[i].CPUTicks >= 0 {
				cpu[strconv.Itoa(pid)] = float64(now.CPUTicks-m.others[i].CPUTicks) / clkTck
			}
		}
		if r.Extra == nil {
			r.Extra = map[string]any{}
		}
		r.Extra["pid_cpu_s"] = cpu
	}
}

// Result is one measurement, printed as JSON for the runner.
type Result struct {
	Name            string           `json:"name"`
	Ops             int64            `json:"ops"`
	Units           int64            `json:"units"` // partitions for commit/fetch, else = ops
	Seconds         float64          `json:"seconds"`
	Rate            float64          `json:"rate"`      // ops per second
	UnitRate        float64          `json:"unit_rate"` // units per second
	P50Ms           float64          `json:"p50_ms"`
	P99Ms           float64          `json:"p99_ms"`
	MaxMs           float64          `json:"max_ms"`
	Errors          map[string]int64 `json:"errors,omitempty"`
	ServerCPUS      float64          `json:"server_cpu_s"`
	ServerSchedCPUS float64          `json:"server_sched_cpu_s"`
	GenCPUS         float64          `json:"gen_cpu_s"`
	RSSBeforeKB     int64            `json:"rss_before_kb"`
	RSSAfterKB      int64            `json:"rss_after_kb"`
	Done            bool             `json:"done"`
	Note            string           `json:"note,omitempty"`
	Extra           map[string]any   `json:"extra,omitempty"`
}

func (r *Result) finishRates() {
	if r.Seconds > 0 {
		r.Rate = float64(r.Ops) / r.Seconds
		r.UnitRate = float64(r.Units) / r.Seconds
	}
}

func (r *Result) addError(code int16, n int64) {
	if r.Errors == nil {
		r.Errors = map[string]int64{}
	}
	r.Errors[strconv.Itoa(int(code))] += n
}

// setLatencies sorts ns latencies and stores p50/p99/max in ms.
func (r *Result) setLatencies(ns []int64) {
	if len(ns) == 0 {
		return
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i] < ns[j] })
	r.P50Ms = float64(pct(ns, 50)) / 1e6
	r.P99Ms = float64(pct(ns, 99)) / 1e6
	r.MaxMs = float64(ns[len(ns)-1]) / 1e6
}

// pct returns the nearest-rank percentile of sorted values.
func pct(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted))+0.999999) - 1
	if rank < 0 {
		rank = 0
	}
	if rank >= len(sorted) {
		rank = len(sorted) - 1
	}
	return sorted[rank]
}
