package registry

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/rayito-dev/rayito/localvm/internal/activity"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// ListInput is the query of ListMicrovms. MaxResults 0 means
// microvmsapi.MaxListResults.
type ListInput struct {
	MaxResults      int
	NextToken       string
	ImageIdentifier string
	ImageVersion    string
}

// List returns microVMs newest first, filtered by image and version when
// given, a page at a time. NextToken is opaque: it continues after the
// last microVM of the previous page even when microVMs come and go
// between pages.
func (r *Registry) List(in ListInput) (microvmsapi.ListMicrovmsOutput, error) {
	if in.MaxResults == 0 {
		in.MaxResults = microvmsapi.MaxListResults
	}
	if in.MaxResults < 1 || in.MaxResults > microvmsapi.MaxListResults {
		return microvmsapi.ListMicrovmsOutput{}, validationErr(fmt.Sprintf("maxResults must be between 1 and %d.", microvmsapi.MaxListResults))
	}
	after := uint64(0)
	if in.NextToken != "" {
		var ok bool
		if after, ok = decodeToken(in.NextToken); !ok {
			return microvmsapi.ListMicrovmsOutput{}, validationErr("nextToken is not valid.")
		}
	}

	type item struct {
		seq uint64
		s   microvmsapi.MicrovmSummary
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return microvmsapi.ListMicrovmsOutput{}, ErrClosed
	}
	purged := r.purgeLocked(now())
	var items []item
	for _, v := range r.vms {
		if after != 0 && v.seq >= after {
			continue
		}
		if in.ImageIdentifier != "" && v.pub.ImageArn != in.ImageIdentifier {
			continue
		}
		if in.ImageVersion != "" && v.pub.ImageVersion != in.ImageVersion {
			continue
		}
		m := clone(v.pub)
		items = append(items, item{v.seq, microvmsapi.MicrovmSummary{
			MicrovmID:    m.MicrovmID,
			State:        m.State,
			ImageArn:     m.ImageArn,
			ImageVersion: m.ImageVersion,
			StartedAt:    m.StartedAt,
		}})
	}
	r.mu.Unlock()
	r.removeFiles(purged)

	sort.Slice(items, func(i, j int) bool { return items[i].seq > items[j].seq })
	out := microvmsapi.ListMicrovmsOutput{Items: []microvmsapi.MicrovmSummary{}}
	for i, it := range items {
		if i == in.MaxResults {
			out.NextToken = encodeToken(items[i-1].seq)
			break
		}
		out.Items = append(out.Items, it.s)
	}
	return out, nil
}

const tokenPrefix = "v1:"

func encodeToken(seq uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + strconv.FormatUint(seq, 10)))
}

func decodeToken(tok string) (uint64, bool) {
	if len(tok) > 64 {
		return 0, false
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, false
	}
	rest, ok := strings.CutPrefix(string(b), tokenPrefix)
	if !ok {
		return 0, false
	}
	seq, err := strconv.ParseUint(rest, 10, 64)
	if err != nil || seq == 0 || strconv.FormatUint(seq, 10) != rest {
		return 0, false
	}
	return seq, true
}

// Target is a microVM as the endpoint proxy sees it. It reads the
// microVM's current state on every call.
type Target struct {
	r *Registry
	v *vm
}

// Lookup finds the microVM of an endpoint host ("<uuid>.microvms.localhost",
// any case, with or without a trailing dot or a port). TERMINATED microVMs
// are found until they vanish; the proxy checks Running and AutoResume.
func (r *Registry) Lookup(endpoint string) (*Target, bool) {
	host := endpoint
	if h, _, err := net.SplitHostPort(endpoint); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.byEndpoint[host]
	if v == nil || r.expiredLocked(v, now()) {
		return nil, false
	}
	return &Target{r: r, v: v}, true
}

// MicrovmID is the microVM's id.
func (t *Target) MicrovmID() string { return t.v.id }

// Running reports whether the microVM is RUNNING.
func (t *Target) Running() bool {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	return t.v.pub.State == microvmsapi.StateRunning
}

// AutoResume reports whether the microVM is SUSPENDING or SUSPENDED with
// an idle policy that resumes it on a request (autoResumeEnabled).
func (t *Target) AutoResume() bool {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	return t.autoResumeLocked()
}

func (t *Target) autoResumeLocked() bool {
	s, p := t.v.pub.State, t.v.pub.IdlePolicy
	return (s == microvmsapi.StateSuspending || s == microvmsapi.StateSuspended) && p != nil && p.AutoResumeEnabled
}

// Wake returns nil once the microVM is RUNNING. A SUSPENDING or
// SUSPENDED one that auto-resumes is resumed (as ResumeMicrovm would) and
// waited for, at most the time a suspension and a resume may take, or
// until ctx ends; anything else is ErrNotRunning.
func (t *Target) Wake(ctx context.Context) error {
	r, v := t.r, t.v
	ctx, cancel := context.WithTimeout(ctx, r.suspendTO+r.resumeTO+2*FreezerTimeout)
	defer cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		switch {
		case v.pub.State == microvmsapi.StateRunning:
			return nil
		case !t.autoResumeLocked():
			return ErrNotRunning
		}
		if v.want != wantRunning {
			if err := r.setWantLocked(v, wantRunning, "proxy"); err != nil {
				return ErrNotRunning
			}
		}
		ch := v.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		r.mu.Lock()
		if ctx.Err() != nil && v.pub.State != microvmsapi.StateRunning {
			return ErrNotRunning
		}
	}
}

// Activity is the microVM's traffic meter, which the endpoint proxy
// updates and the idle policy reads.
func (t *Target) Activity() *activity.Meter { return &t.v.meter }

// ErrHooksPort is Addr's error for port 9000: the hooks are never reachable
// through the endpoint.
var ErrHooksPort = errors.New("registry: the hooks port is not reachable through the endpoint")

// ErrNotRunning is Addr's error for a microVM that is not RUNNING.
var ErrNotRunning = errors.New("registry: the microVM is not running")

// Addr returns a host-reachable address of a guest port of a RUNNING
// microVM: rayd's API for port 8080, the guest's port otherwise (which
// fails for unprivileged sandboxes), and always an error for the hooks
// port 9000.
func (t *Target) Addr(port int) (string, error) {
	if port == microvmsapi.HooksPort {
		return "", ErrHooksPort
	}
	t.r.mu.Lock()
	inst, running := t.v.inst, t.v.pub.State == microvmsapi.StateRunning
	t.r.mu.Unlock()
	if !running || inst == nil {
		return "", ErrNotRunning
	}
	if port == microvmsapi.DefaultProxyPort {
		return inst.APIAddr(), nil
	}
	return inst.GuestAddr(port)
}
