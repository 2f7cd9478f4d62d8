package e2b

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"maps"
	"net/url"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// labelKey is the sandbox label where the gateway keeps what it must
// know of a sandbox across its own restarts (E2B templateID, secure,
// allowPublicTraffic, lifecycle): not secret, like every label, and
// hidden from E2B's metadata.
const labelKey = "rayito-e2b"

// record is what the gateway knows of one sandbox.
type record struct {
	id         string
	templateID string
	metadata   map[string]string // the user's, without labelKey
	secure     bool              // the SDK sends the access token itself
	public     bool              // allowPublicTraffic: user ports need no traffic token
	onTimeout  rayito.TimeoutAction
	autoResume bool
	// envs are the envVars of the create, kept in this process's memory
	// only (never in a label, never logged) so that a fork gets them; nil
	// for a sandbox this process did not create.
	envs map[string]string
	// headerRules are network.rules (E2B Secrets), in this process's
	// memory only, likewise.
	headerRules []headerRule
	// complete is false when the gateway could not read the label (a
	// sandbox paused when first seen, or without a token here): it then
	// assumes secure and private, which only refuses more.
	complete      bool
	network       *networkOut
	allowInternet *bool
	cpuCount      int
	memoryMB      int
	diskSizeMB    int
	endAt         time.Time
	learnedAt     time.Time // when the gateway last tried to read the label
}

// relearnAfter is how long the gateway waits before reading again the
// labels of a sandbox it could not fully read.
const relearnAfter = time.Minute

func (r *record) label() string {
	v := url.Values{}
	v.Set("v", "1")
	v.Set("t", r.templateID)
	v.Set("s", boolStr(r.secure))
	v.Set("p", boolStr(r.public))
	v.Set("o", string(r.onTimeout))
	v.Set("a", boolStr(r.autoResume))
	return v.Encode()
}

// recordFromLabels rebuilds a record from a sandbox's labels.
func recordFromLabels(id string, md map[string]string, fallbackTemplate string) *record {
	r := &record{id: id, templateID: fallbackTemplate, secure: true, onTimeout: rayito.TimeoutKill}
	user := maps.Clone(md)
	delete(user, labelKey)
	r.metadata = user
	if l, ok := md[labelKey]; ok {
		if v, err := url.ParseQuery(l); err == nil && v.Get("v") == "1" {
			r.complete = true
			r.templateID = v.Get("t")
			r.secure = v.Get("s") != "0"
			r.public = v.Get("p") == "1"
			if v.Get("o") == string(rayito.TimeoutPause) {
				r.onTimeout = rayito.TimeoutPause
			}
			r.autoResume = v.Get("a") == "1"
		}
	}
	return r
}

func boolStr(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// trafficToken is the sandbox's E2B traffic access token: an HMAC of its
// id under its access token, so that it needs no state of its own and
// survives the gateway's restarts, and reveals nothing of the access
// token.
func trafficToken(id, accessToken string) string {
	m := hmac.New(sha256.New, []byte(accessToken))
	m.Write([]byte("rayito-e2b-traffic-v1:" + id))
	return hex.EncodeToString(m.Sum(nil))
}

func validTraffic(got, id, accessToken string) bool {
	if got == "" || accessToken == "" {
		return false
	}
	want := trafficToken(id, accessToken)
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (s *Server) remember(r *record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.known[r.id] = r
}

// recordOf returns a copy of the record of id, or nil: records are
// changed only under s.mu, in place.
func (s *Server) recordOf(id string) *record {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.known[id]
	if r == nil {
		return nil
	}
	cp := *r
	return &cp
}

// forget drops everything the gateway holds of id.
func (s *Server) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.known, id)
	delete(s.conns, id)
}

// learn returns the record of id, reading its labels through the
// sandbox when the gateway does not know it yet (it was created before a
// restart, or by another program). info is the platform's view.
func (s *Server) learn(ctx context.Context, info *rayito.Info) *record {
	if r := s.recordOf(info.ID); r != nil && (r.complete || time.Since(r.learnedAt) < relearnAfter) {
		return r
	}
	r := &record{id: info.ID, templateID: info.Template, secure: true, onTimeout: rayito.TimeoutKill}
	if info.State == "RUNNING" {
		c, err := s.connFor(ctx, info.ID)
		if err == nil {
			ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
			full, err := c.sbx.Info(ictx)
			cancel()
			if err == nil {
				r = recordFromLabels(info.ID, full.Metadata, info.Template)
				r.cpuCount = full.CPUCount
				r.memoryMB = memMB(full)
				if full.Lifecycle != nil {
					r.endAt = full.Lifecycle.Deadline
				}
			}
		}
	}
	r.learnedAt = time.Now()
	if old := s.recordOf(info.ID); old != nil && !r.complete {
		s.mu.Lock()
		if k := s.known[info.ID]; k != nil {
			k.learnedAt = r.learnedAt
		}
		s.mu.Unlock()
		return old
	}
	s.remember(r)
	cp := *r
	return &cp
}

func memMB(i *rayito.Info) int {
	b := i.MemoryLimit
	if b == 0 {
		b = i.MemoryBytes
	}
	return int(b >> 20)
}

// errNotRunning: the sandbox is not (or no longer) running.
var errNotRunning = errors.New("not running")
