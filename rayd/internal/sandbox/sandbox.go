// Package sandbox holds what rayd learns about its sandbox at boot: the
// configuration installed once by the platform's /run hook (sandbox id,
// access-token digest, envs, default user, workdir, metadata, the lifecycle
// block). It implements auth.Authorizer and the /run and /terminate half of
// hooks.Lifecycle (the daemon adds suspend, resume and validate).
//
// Nothing unique exists before /run: a snapshot taken before it is
// identical in every sandbox cloned from it.
package sandbox

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	"github.com/rayito-dev/rayito/proto/runpayload"
	ptemplate "github.com/rayito-dev/rayito/proto/template"
	"github.com/rayito-dev/rayito/rayd/internal/hooks"
)

// maxSandboxIDLen bounds the microvmId accepted from /run.
const maxSandboxIDLen = 256

// Boot is the configuration installed by /run. It is immutable once
// installed: readers share one pointer.
type Boot struct {
	SandboxID   string
	TokenDigest string
	// Envs are added to every process's environment after PATH, HOME, USER
	// and LOGNAME and before the request's own envs.
	Envs map[string]string
	// User is the default account ("user" unless the payload says).
	User string
	// Workdir is the default working directory; WorkdirSet tells whether
	// the payload chose it (a chosen one must exist, the default falls back
	// to HOME).
	Workdir    string
	WorkdirSet bool
	Metadata   map[string]string
	// CPUSeconds is the RLIMIT_CPU for user processes; 0 means none.
	CPUSeconds int
	// Lifecycle is the payload's timeout policy; nil: unmanaged.
	Lifecycle *runpayload.Lifecycle
	// Network is the payload's network block; nil: none (the boot policy
	// stays: unrestricted, IMDS blocked).
	Network *runpayload.Network
	// Persist is the bucket and prefix the sandbox's checkpoints and
	// restores are bound to; nil: none.
	Persist *runpayload.Persist
}

// Options configure a State.
type Options struct {
	Logger *slog.Logger
	// Template is the image's template configuration (its defaults: the
	// payload's envs, user and workdir win over them); nil: none.
	Template *ptemplate.Runtime
	// Terminate stops user processes; called by the /terminate hook.
	Terminate func(ctx context.Context)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// State is the sandbox's boot state. It is safe for concurrent use.
type State struct {
	log       *slog.Logger
	terminate func(ctx context.Context)
	template  *ptemplate.Runtime
	started   time.Time

	sandboxID atomic.Pointer[string]
	boot      atomic.Pointer[Boot]
}

// New returns a State with nothing installed.
func New(opts Options) *State {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &State{log: log, terminate: opts.Terminate, started: now(), template: opts.Template}
}

// Run installs the boot configuration from the /run envelope. The hooks
// server guarantees it is called at most once. An invalid payload leaves
// the sandbox tokenless: every RPC but Health is then Unauthenticated.
func (s *State) Run(_ context.Context, microvmID, runHookPayload string) hooks.Outcome {
	if validSandboxID(microvmID) {
		id := microvmID
		s.sandboxID.Store(&id)
	}
	p, err := runpayload.Decode(runHookPayload)
	if err != nil || !validSandboxID(microvmID) {
		// Only the reason class is logged, never the payload.
		s.log.Warn("run payload rejected; rayd stays tokenless", "reason", reasonOf(err))
		return hooks.OutcomeTokenless
	}
	b := &Boot{
		SandboxID:   microvmID,
		TokenDigest: p.TokenSHA256,
		Envs:        maps.Clone(p.Envs),
		User:        p.EffectiveUser(),
		Workdir:     p.EffectiveWorkdir(),
		WorkdirSet:  p.Workdir != "",
		Metadata:    maps.Clone(p.Metadata),
	}
	s.applyTemplate(b, p)
	if p.Limits != nil {
		b.CPUSeconds = p.Limits.CPUSeconds
	}
	if p.Lifecycle != nil {
		l := *p.Lifecycle
		b.Lifecycle = &l
	}
	if p.Network != nil {
		n := runpayload.Network{Enforce: p.Network.Enforce, AllowOut: slices.Clone(p.Network.AllowOut), DenyOut: slices.Clone(p.Network.DenyOut)}
		b.Network = &n
	}
	if p.Persist != nil {
		ps := *p.Persist
		b.Persist = &ps
	}
	s.boot.Store(b)
	s.log.Info("sandbox configured", "envs", len(b.Envs), "metadata_keys", len(b.Metadata))
	return hooks.OutcomeInstalled
}

// applyTemplate puts the template's defaults under the payload's: its
// envs first (the payload's win), its user and workdir where the payload
// names none.
func (s *State) applyTemplate(b *Boot, p *runpayload.Payload) {
	t := s.template
	if t == nil {
		return
	}
	if len(t.Envs) > 0 {
		envs := maps.Clone(t.Envs)
		maps.Copy(envs, b.Envs)
		b.Envs = envs
	}
	if p.User == "" && t.User != "" {
		b.User = t.User
	}
	if p.Workdir == "" && t.Workdir != "" && t.Workdir != runpayload.DefaultWorkdir {
		b.Workdir, b.WorkdirSet = t.Workdir, true
	}
}

func reasonOf(err error) string {
	if err == nil {
		return "invalid_sandbox_id"
	}
	return "invalid_payload"
}

// Terminate stops user processes.
func (s *State) Terminate(ctx context.Context) {
	if s.terminate != nil {
		s.terminate(ctx)
	}
}

// Boot returns the installed configuration, or nil before a valid /run.
func (s *State) Boot() *Boot { return s.boot.Load() }

// SandboxID returns the microvmId given to /run, or "".
func (s *State) SandboxID() string {
	if p := s.sandboxID.Load(); p != nil {
		return *p
	}
	return ""
}

// Uptime is the time since rayd started.
func (s *State) Uptime() time.Duration { return time.Since(s.started) }

// Authorize reports whether token is the sandbox's access token. It is
// false before /run, after an invalid /run, and for any malformed token.
// The comparison is constant-time.
func (s *State) Authorize(token string) bool {
	b := s.boot.Load()
	if b == nil || token == "" {
		return false
	}
	return accesstoken.Verify(token, b.TokenDigest)
}

func validSandboxID(id string) bool {
	if id == "" || len(id) > maxSandboxIDLen {
		return false
	}
	for _, r := range id {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) || r == ' ' {
			return false
		}
	}
	return true
}

// Template is the image's template configuration; nil: none.
func (s *State) Template() *ptemplate.Runtime { return s.template }
