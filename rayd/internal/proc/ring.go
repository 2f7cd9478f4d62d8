package proc

import (
	"sync/atomic"
	"time"
)

// chunk is one read from a pipe. Its data is immutable once appended.
type chunk struct {
	seq    uint64
	off    uint64    // bytes of output appended before this chunk
	at     time.Time // when it was appended
	stream Stream
	data   []byte
}

// ring is the per-process output store, guarded by Process.mu.
//
// It holds a contiguous run of chunks, oldest first. The newest chunks that
// fit in limit bytes (always at least the newest one) form the replay
// window, which is kept unconditionally. Older chunks are "extra": they are
// kept only while a subscriber still needs them; the Process decides when
// to drop them (see Process.enforceLocked).
//
// Every byte held is accounted in *acct, the supervisor-wide counter checked
// against Options.OutputBudget.
type ring struct {
	limit    int64         // replay window size (Options.RingBytes); 0 once evicted
	acct     *atomic.Int64 // supervisor-wide bytes held
	chunks   []chunk       // chunks[i].seq == first+i
	first    uint64        // seq of chunks[0], or next when empty
	next     uint64        // seq of the next chunk
	winStart uint64        // first seq of the replay window
	winBytes int64         // bytes in the replay window
	held     int64         // bytes in chunks
	head     uint64        // total bytes ever appended
}

func newRing(limit int, acct *atomic.Int64) ring {
	return ring{limit: int64(limit), acct: acct, first: 1, next: 1, winStart: 1}
}

// get returns the chunk with sequence number seq, or nil if it is not held.
func (r *ring) get(seq uint64) *chunk {
	if seq < r.first || seq >= r.next {
		return nil
	}
	return &r.chunks[seq-r.first]
}

// push appends data as the next chunk and slides the replay window.
func (r *ring) push(stream Stream, data []byte, now time.Time) {
	n := int64(len(data))
	r.chunks = append(r.chunks, chunk{seq: r.next, off: r.head, at: now, stream: stream, data: data})
	r.next++
	r.head += uint64(n)
	r.held += n
	r.winBytes += n
	r.acct.Add(n)
	r.slide()
}

// slide moves the window start forward until the window fits in limit,
// keeping at least the newest chunk (none once the limit is 0).
func (r *ring) slide() {
	for r.winStart < r.next && r.winBytes > r.limit && (r.limit == 0 || r.winStart < r.next-1) {
		r.winBytes -= int64(len(r.get(r.winStart).data))
		r.winStart++
	}
	if r.limit == 0 {
		r.winStart, r.winBytes = r.next, 0
	}
}

// lag returns how many bytes a subscriber whose next chunk is cursor is
// behind the head.
func (r *ring) lag(cursor uint64) int64 {
	c := r.get(cursor)
	if c == nil {
		return 0
	}
	return int64(r.head - c.off)
}

// dropBefore releases every chunk with a sequence number below keep. It
// never drops into the replay window.
func (r *ring) dropBefore(keep uint64) {
	keep = min(keep, r.winStart)
	var freed int64
	i := 0
	for ; r.first < keep; i++ {
		freed += int64(len(r.chunks[i].data))
		r.chunks[i] = chunk{} // let the data be collected
		r.first++
	}
	if i == 0 {
		return
	}
	r.chunks = r.chunks[i:]
	if len(r.chunks) == 0 {
		r.chunks = nil
	}
	r.held -= freed
	r.acct.Add(-freed)
}

// releaseWindow empties the replay window for good (the process is no
// longer retained); the chunks are dropped by the next dropBefore.
func (r *ring) releaseWindow() {
	r.limit = 0
	r.slide()
}
