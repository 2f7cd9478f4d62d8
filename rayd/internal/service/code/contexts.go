package code

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"time"

	"sync"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/jupyter"
)

// codeContext is one context: its kernel (started, restarted after it
// died) and its executions.
type codeContext struct {
	s        *Service
	id       string
	language string
	cwd      *string
	envs     map[string]string
	seq      uint64 // creation order
	// slot admits one execution at a time.
	slot chan struct{}

	mu          sync.Mutex
	k           *jupyter.Kernel
	starting    chan struct{} // closed when the start in progress ends
	startCancel context.CancelFunc
	destroyed   bool
	execs       map[string]*execution
	ended       []string // ids of ended executions, oldest first
	workdir     string   // the kernel's working directory, once known
}

// newContext makes a context; the caller holds s.mu.
func newContext(s *Service, id, language string, cwd *string, envs map[string]string) *codeContext {
	s.ctxSeq++
	return &codeContext{s: s, id: id, language: language, cwd: cwd, envs: maps.Clone(envs), seq: s.ctxSeq, slot: make(chan struct{}, 1), execs: map[string]*execution{}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// info renders the context. Its cwd is the one it was created with, else
// the directory its kernel starts in (the sandbox's workdir or the user's
// home, as for processes), known before the kernel starts.
func (cc *codeContext) info() *raydv1.CodeContext {
	c := &raydv1.CodeContext{ContextId: cc.id, Language: cc.language}
	if cc.cwd != nil {
		c.Cwd = *cc.cwd
		return c
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.workdir == "" {
		if boot := cc.s.opts.State.Boot(); boot != nil {
			if dir, err := cc.s.opts.Builder.Workdir(boot, nil); err == nil {
				cc.workdir = dir
			}
		}
	}
	c.Cwd = cc.workdir
	return c
}

// current returns the kernel, if any (possibly dead).
func (cc *codeContext) current() *jupyter.Kernel {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.k
}

// ensureKernel returns the running kernel, starting one when there is none
// or it died. Concurrent callers share one start.
func (cc *codeContext) ensureKernel(ctx context.Context) (*jupyter.Kernel, error) {
	cc.mu.Lock()
	for {
		if cc.destroyed {
			cc.mu.Unlock()
			return nil, jupyter.ErrClosed
		}
		if cc.k != nil && cc.k.Alive() {
			k := cc.k
			cc.mu.Unlock()
			return k, nil
		}
		if cc.starting == nil {
			break
		}
		ch := cc.starting
		cc.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		cc.mu.Lock()
	}
	old := cc.k
	cc.k = nil
	done := make(chan struct{})
	cc.starting = done
	sctx, cancel := context.WithTimeout(context.Background(), jupyter.DefaultStartTimeout)
	cc.startCancel = cancel
	cc.mu.Unlock()
	if old != nil {
		old.Close()
	}
	nk, err := cc.s.startKernel(sctx, cc)
	cancel()
	cc.mu.Lock()
	cc.starting, cc.startCancel = nil, nil
	close(done)
	destroyed := cc.destroyed
	if err == nil && !destroyed {
		cc.k = nk
	}
	cc.mu.Unlock()
	if cc.id == defaultID("python") {
		cc.s.readyFail.Store(err != nil)
	}
	switch {
	case err != nil:
		return nil, err
	case destroyed:
		nk.Close()
		return nil, jupyter.ErrClosed
	}
	return nk, nil
}

// restart kills the kernel and starts a new one (state lost, same id).
func (cc *codeContext) restart(ctx context.Context) error {
	cc.mu.Lock()
	old := cc.k
	cc.k = nil
	cc.mu.Unlock()
	if old != nil {
		old.Close()
	}
	_, err := cc.ensureKernel(ctx)
	return err
}

// destroy kills the kernel (also one being started) and removes its
// directory; running executions end with ErrClosed.
func (cc *codeContext) destroy() {
	cc.mu.Lock()
	cc.destroyed = true
	k, starting := cc.k, cc.starting
	cc.k = nil
	if cc.startCancel != nil {
		cc.startCancel()
	}
	execs := make([]*execution, 0, len(cc.execs))
	for _, e := range cc.execs {
		execs = append(execs, e)
	}
	cc.mu.Unlock()
	if k != nil {
		k.Close()
	}
	if starting != nil {
		<-starting
	}
	for _, e := range execs {
		e.cancel()
	}
}

// addExecution registers e.
func (cc *codeContext) addExecution(e *execution) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.execs[e.id] = e
}

// execution returns a live or retained execution.
func (cc *codeContext) execution(id string) (*execution, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if e := cc.execs[id]; e != nil {
		return e, nil
	}
	return nil, jupyter.ErrExecutionNotFound
}

// ended keeps e reattachable for retainEnded (at most maxRetained ended
// executions per context), then forgets it.
func (cc *codeContext) endExecution(e *execution) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.ended = append(cc.ended, e.id)
	for len(cc.ended) > maxRetained {
		delete(cc.execs, cc.ended[0])
		cc.ended = cc.ended[1:]
	}
	time.AfterFunc(retainEnded, func() {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		if cc.execs[e.id] == e {
			delete(cc.execs, e.id)
		}
	})
}
