package metrics

// ring holds the newest capacity samples in ascending time.
type ring struct {
	capacity int
	buf      []Sample // allocated at the first push
	start, n int
}

func (r *ring) at(i int) *Sample { return &r.buf[(r.start+i)%len(r.buf)] }

// push appends smp, dropping the oldest sample when full. Samples newer
// than smp (the wall clock went back) are dropped first, so the ring stays
// in ascending order.
func (r *ring) push(smp Sample) {
	if r.buf == nil {
		r.buf = make([]Sample, r.capacity)
	}
	for r.n > 0 && r.at(r.n-1).UnixMilli > smp.UnixMilli {
		r.n--
	}
	if r.n == len(r.buf) {
		r.start = (r.start + 1) % len(r.buf)
		r.n--
	}
	*r.at(r.n) = smp
	r.n++
}

// oldest returns the time of the oldest sample, or 0.
func (r *ring) oldest() int64 {
	if r.n == 0 {
		return 0
	}
	return r.at(0).UnixMilli
}

// between returns a copy of the samples in [start, end], ascending; 0
// means no bound.
func (r *ring) between(start, end int64) []Sample {
	var out []Sample
	for i := range r.n {
		smp := r.at(i)
		if smp.UnixMilli < start {
			continue
		}
		if end != 0 && smp.UnixMilli > end {
			break
		}
		out = append(out, *smp)
	}
	return out
}

// downsample keeps at most n of xs, evenly spread, the first and the last
// included (n = 1 keeps the last). n ≤ 0 keeps them all.
func downsample(xs []Sample, n int) []Sample {
	if n <= 0 || len(xs) <= n {
		return xs
	}
	if n == 1 {
		return xs[len(xs)-1:]
	}
	out := make([]Sample, n)
	last := len(xs) - 1
	for i := range out {
		out[i] = xs[(i*last+(n-1)/2)/(n-1)]
	}
	return out
}
