package main

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
)

// PipeSpec drives pipelined requests over connections: each connection keeps up to
// Inflight requests outstanding (the server still processes one per connection at a time,
// so the extra ones only queue there). Bounded by Duration and by MaxOps.
type PipeSpec struct {
	Conns    []*Conn
	Inflight int
	Duration time.Duration
	MaxOps   int64
	API      int16
	Version  int16
	// Next appends the request frame for connection ci, sequence seq to buf (correlation id
	// is patched by the engine).
	Next func(ci int, seq int64, buf []byte) []byte
	// Check reads a response body: units served and first error code.
	Check func(ci int, d *Dec) (units int, ec int16, err error)
}

type PipeOutcome struct {
	Ops, Units int64
	Lat        []int64
	Errors     map[int16]int64
	Failures   []string
	Elapsed    time.Duration
}

func runPipe(s PipeSpec) PipeOutcome {
	var issued int64
	deadline := time.Now().Add(s.Duration)
	start := time.Now()
	type connOut struct {
		ops, units int64
		lat        []int64
		errs       map[int16]int64
		fail       string
	}
	outs := make([]connOut, len(s.Conns))
	perConn := int(s.MaxOps)/len(s.Conns) + 1
	if perConn > 4_000_000 {
		perConn = 4_000_000
	}
	var wg sync.WaitGroup
	for ci, c := range s.Conns {
		ci, c := ci, c
		times := make(chan int64, s.Inflight-1)
		wg.Add(2)
		go func() { // writer
			defer wg.Done()
			defer close(times)
			var batch []byte
			seq := int64(0)
			for {
				if time.Now().After(deadline) {
					return
				}
				if atomic.AddInt64(&issued, 1) > s.MaxOps {
					return
				}
				now := time.Now().UnixNano()
				times <- now
				batch = batch[:0]
				n := len(batch)
				batch = s.Next(ci, seq, batch)
				c.corr++
				binary.BigEndian.PutUint32(batch[n+8:n+12], uint32(c.corr))
				seq++
			more:
				for k := 1; k < s.Inflight; k++ {
					if atomic.LoadInt64(&issued) >= s.MaxOps {
						break
					}
					select {
					case times <- now:
						atomic.AddInt64(&issued, 1)
						n = len(batch)
						batch = s.Next(ci, seq, batch)
						c.corr++
						binary.BigEndian.PutUint32(batch[n+8:n+12], uint32(c.corr))
						seq++
					default:
						break more
					}
				}
				_ = c.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
				if _, err := c.nc.Write(batch); err != nil {
					outs[ci].fail = "write: " + err.Error()
					return
				}
			}
		}()
		go func() { // reader
			defer wg.Done()
			o := &outs[ci]
			o.lat = make([]int64, 0, perConn)
			o.errs = map[int16]int64{}
			var buf []byte
			var err error
			for t := range times {
				_ = c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
				buf, err = readFrame(c.r, buf)
				if err != nil {
					if o.fail == "" {
						o.fail = "read: " + err.Error()
					}
					_ = c.nc.Close()
					for range times {
					}
					return
				}
				o.lat = append(o.lat, time.Now().UnixNano()-t)
				d, _ := responseBody(buf, s.API, s.Version)
				units, ec, cerr := s.Check(ci, d)
				if cerr != nil && o.fail == "" {
					o.fail = "decode: " + cerr.Error()
				}
				o.ops++
				o.units += int64(units)
				if ec != 0 {
					o.errs[ec]++
				}
			}
		}()
	}
	wg.Wait()
	res := PipeOutcome{Errors: map[int16]int64{}, Elapsed: time.Since(start)}
	total := 0
	for _, o := range outs {
		total += len(o.lat)
	}
	res.Lat = make([]int64, 0, total)
	for _, o := range outs {
		res.Ops += o.ops
		res.Units += o.units
		res.Lat = append(res.Lat, o.lat...)
		for k, v := range o.errs {
			res.Errors[k] += v
		}
		if o.fail != "" {
			res.Failures = append(res.Failures, o.fail)
		}
	}
	return res
}

func (o PipeOutcome) into(r *Result) {
	r.Ops = o.Ops
	r.Units = o.Units
	r.setLatencies(o.Lat)
	for k, v := range o.Errors {
		r.addError(k, v)
	}
	r.Done = len(o.Failures) == 0
	if len(o.Failures) > 0 {
		r.Note = o.Failures[0]
	}
}
