package metrics

import (
	"bytes"
	"errors"
)

// clockTicks is USER_HZ, the unit of the times in /proc/[pid]/stat: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

var errStat = errors.New("metrics: malformed /proc/[pid]/stat")

// procStat is what the sampler uses of one /proc/[pid]/stat line.
type procStat struct {
	ppid int
	// ticks is utime + stime + cutime + cstime, in clock ticks.
	ticks uint64
	// rssPages is the resident set, in pages.
	rssPages uint64
}

// Field numbers of /proc/[pid]/stat (proc(5), counted from 1; 2 is the
// command name in parentheses).
const (
	fieldState  = 3
	fieldPpid   = 4
	fieldUtime  = 14
	fieldCstime = 17
	fieldRss    = 24
)

// parseStat parses one /proc/[pid]/stat line. The command name (field 2)
// may hold any byte, spaces and parentheses included, so the fields are
// counted from the last ')'. Negative cutime, cstime or rss (signed in the
// kernel's format) count as 0.
func parseStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || bytes.IndexByte(b, '(') < 0 {
		return procStat{}, errStat
	}
	var st procStat
	rest := b[i+1:]
	field := fieldState
	for field <= fieldRss {
		rest = bytes.TrimLeft(rest, " ")
		if len(rest) == 0 {
			return procStat{}, errStat
		}
		tok := rest
		if j := bytes.IndexAny(rest, " \n"); j >= 0 {
			tok, rest = rest[:j], rest[j:]
		} else {
			rest = nil
		}
		switch {
		case field == fieldState:
		case field == fieldPpid:
			v, ok := parseInt(tok)
			if !ok || v < 0 || v > 1<<31 {
				return procStat{}, errStat
			}
			st.ppid = int(v)
		case field >= fieldUtime && field <= fieldCstime:
			v, ok := parseInt(tok)
			if !ok {
				return procStat{}, errStat
			}
			if v > 0 {
				if st.ticks+uint64(v) < st.ticks {
					return procStat{}, errStat
				}
				st.ticks += uint64(v)
			}
		case field == fieldRss:
			v, ok := parseInt(tok)
			if !ok {
				return procStat{}, errStat
			}
			st.rssPages = uint64(max(v, 0))
		default:
			if _, ok := parseInt(tok); !ok {
				return procStat{}, errStat
			}
		}
		field++
	}
	return st, nil
}

// parseInt parses a decimal integer with an optional '-' that fits in an
// int64.
func parseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if v > (1<<63-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		v = -v
	}
	return v, true
}

// meminfo is what the sampler uses of /proc/meminfo, in bytes.
type meminfo struct {
	total, free, available, buffers, cached uint64
	hasTotal, hasAvailable                  bool
}

// used is the memory in use as free(1) shows it: MemTotal − MemAvailable,
// or MemTotal − MemFree − Buffers − Cached on kernels before 3.14.
func (m meminfo) used() uint64 {
	avail := m.available
	if !m.hasAvailable {
		avail = m.free + m.buffers + m.cached
	}
	if avail >= m.total {
		return 0
	}
	return m.total - avail
}

// parseMeminfo parses /proc/meminfo ("Key:   value kB" lines). Malformed
// lines and unknown keys are skipped; ok is false without a MemTotal.
func parseMeminfo(b []byte) (m meminfo, ok bool) {
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		key, val, found := bytes.Cut(line, []byte{':'})
		if !found {
			continue
		}
		var dst *uint64
		switch string(key) {
		case "MemTotal":
			dst = &m.total
		case "MemFree":
			dst = &m.free
		case "MemAvailable":
			dst = &m.available
		case "Buffers":
			dst = &m.buffers
		case "Cached":
			dst = &m.cached
		default:
			continue
		}
		val = bytes.TrimSpace(val)
		mult := uint64(1)
		if num, found := bytes.CutSuffix(val, []byte(" kB")); found {
			val, mult = bytes.TrimSpace(num), 1024
		}
		v, vok := parseInt(val)
		if !vok || v < 0 || uint64(v) > (1<<64-1)/mult {
			continue
		}
		*dst = uint64(v) * mult
		switch dst {
		case &m.total:
			m.hasTotal = true
		case &m.available:
			m.hasAvailable = true
		}
	}
	return m, m.hasTotal
}
