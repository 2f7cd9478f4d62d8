// Package mcpserver is the MCP server of `rayito mcp`: tools an agent
// calls to create sandboxes, run commands and code in them, move files and
// kill them, on the platform the CLI's other commands use, through the
// Go SDK.
//
// Which sandboxes a client may use: the ones this server created, and,
// unless OnlyOwn, any other sandbox of the user whose id the client names
// (reached with the user's token store, as `rayito sandbox exec` reaches
// it). list_sandboxes shows the same set. Close kills the sandboxes this
// server created (unless the caller keeps them) and never any other.
//
// Tool results carry at most MaxOutputChars characters of text, with a
// note where text was cut. Errors are tool errors (IsError) with the SDK's
// words and reason; nothing is logged, so no argument (envs, file
// contents, commands) leaves the process but in the answers to the client.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// DefaultMaxSandboxes is how many sandboxes a server keeps alive at once
// unless Options says otherwise.
const DefaultMaxSandboxes = 8

// Errors of the access policy and the limits; tool errors carry their
// text.
var (
	// ErrNotOwn: OnlyOwn is set and the sandbox was not created by this
	// server.
	ErrNotOwn = errors.New("this sandbox was not created by this MCP server, and the server runs with --only-own")
	// ErrTooMany: the server already runs MaxSandboxes sandboxes.
	ErrTooMany = errors.New("this MCP server already runs its maximum number of sandboxes (--max-sandboxes): kill one first")
	// ErrClosed: the server is shutting down.
	ErrClosed = errors.New("the MCP server is shutting down")
)

// Options configure a Server.
type Options struct {
	// SDK are the options of every SDK call: backend, endpoint, token
	// store.
	SDK []rayito.Option
	// OnlyOwn restricts every tool to the sandboxes this server created.
	OnlyOwn bool
	// MaxSandboxes caps the sandboxes this server created that are alive
	// at once (DefaultMaxSandboxes when 0).
	MaxSandboxes int
	// Version is the server's version, as MCP clients see it.
	Version string
}

// Server holds the MCP server and the sandboxes it created. It is safe for
// concurrent use (the HTTP transport runs tools concurrently).
type Server struct {
	opts Options
	mcp  *mcp.Server

	mu sync.Mutex
	// own are the sandboxes this server created and has not killed;
	// others are connections to sandboxes the client named.
	own, others map[string]*rayito.Sandbox
	// creating counts creates under way (against MaxSandboxes).
	creating int
	closed   bool
	// inFlight counts the requests being handled (see StdioTransport).
	inFlight atomic.Int64
}

// New returns a Server with its tools registered.
func New(opts Options) *Server {
	if opts.MaxSandboxes <= 0 {
		opts.MaxSandboxes = DefaultMaxSandboxes
	}
	s := &Server{opts: opts, own: map[string]*rayito.Sandbox{}, others: map[string]*rayito.Sandbox{}}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "rayito", Title: "Rayito sandboxes", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: instructions(opts.OnlyOwn),
	})
	s.mcp.AddReceivingMiddleware(s.countInFlight)
	s.addTools()
	return s
}

func instructions(onlyOwn bool) string {
	use := "sandboxes this server created, and any other sandbox of the user whose id you pass"
	if onlyOwn {
		use = "only the sandboxes this server created"
	}
	return "Rayito runs disposable, isolated Linux sandboxes. Call create first and pass the sandbox_id it returns to the other tools. " +
		"Tools act on " + use + ". Sandboxes this server created are killed when it stops unless it was started with --keep. " +
		fmt.Sprintf("Text results are cut at %d characters, with a note saying how much was cut.", MaxOutputChars)
}

// MCP returns the MCP server, for a transport.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Owned returns the ids of the sandboxes this server created and has not
// killed.
func (s *Server) Owned() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedKeys(s.own)
}

// Close refuses new sandboxes and, unless keep, kills every sandbox this
// server created (and only those). It returns the ids it killed; a kill
// that failed is in the error, the others go on.
func (s *Server) Close(ctx context.Context, keep bool) ([]string, error) {
	s.mu.Lock()
	s.closed = true
	own := s.own
	if !keep {
		s.own = map[string]*rayito.Sandbox{}
	}
	s.others = map[string]*rayito.Sandbox{}
	s.mu.Unlock()
	if keep {
		return nil, nil
	}
	// In parallel: an MCP client gives a stdio server a few seconds
	// after it closes stdin before it kills it.
	ids := sortedKeys(own)
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			err := own[id].Kill(ctx)
			if err != nil && !errors.Is(err, rayito.ErrNotFound) && !errors.Is(err, rayito.ErrSandboxEnded) {
				errs[i] = fmt.Errorf("kill %s: %s", id, cliutil.Describe(err))
			}
		})
	}
	wg.Wait()
	var killed []string
	for i, id := range ids {
		if errs[i] == nil {
			killed = append(killed, id)
		}
	}
	return killed, errors.Join(errs...)
}

// reserve takes a place for one more sandbox of the server's own.
func (s *Server) reserve() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case len(s.own)+s.creating >= s.opts.MaxSandboxes:
		return ErrTooMany
	}
	s.creating++
	return nil
}

// pruneEnded forgets the server's own sandboxes that have ended (their
// timeout passed, or something else killed them), so they no longer count
// against MaxSandboxes; it reports whether it forgot any.
func (s *Server) pruneEnded(ctx context.Context) bool {
	s.mu.Lock()
	own := make(map[string]*rayito.Sandbox, len(s.own))
	maps.Copy(own, s.own)
	s.mu.Unlock()
	pruned := false
	for id, sbx := range own {
		info, err := sbx.Info(ctx)
		ended := errors.Is(err, rayito.ErrSandboxEnded) || errors.Is(err, rayito.ErrNotFound) ||
			err == nil && (info.State == string(microvmsapi.StateTerminated) || info.State == string(microvmsapi.StateTerminating))
		if ended {
			s.forget(id)
			pruned = true
		}
	}
	return pruned
}

// adopt records a sandbox create made, giving back its reservation. When
// the server closed meanwhile, it reports false: the caller kills it.
func (s *Server) adopt(sbx *rayito.Sandbox) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creating--
	if sbx == nil || s.closed {
		return false
	}
	s.own[sbx.ID()] = sbx
	return true
}

// sandbox returns the sandbox id names, by the access policy: one of the
// server's own, else (unless OnlyOwn) a connection to the user's sandbox
// through the token store.
func (s *Server) sandbox(ctx context.Context, id string) (*rayito.Sandbox, error) {
	if err := cliutil.CheckID(id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if sbx, ok := s.own[id]; ok {
		s.mu.Unlock()
		return sbx, nil
	}
	if s.opts.OnlyOwn {
		s.mu.Unlock()
		return nil, ErrNotOwn
	}
	if sbx, ok := s.others[id]; ok {
		s.mu.Unlock()
		return sbx, nil
	}
	s.mu.Unlock()
	sbx, err := rayito.Connect(ctx, id, s.opts.SDK...)
	if errors.Is(err, rayito.ErrNoAccessToken) {
		return nil, fmt.Errorf("%w: no access token is stored for sandbox %s (this user's token store has the sandboxes created by rayito and the SDK)", err, id)
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.others[id]; ok {
		return prev, nil
	}
	s.others[id] = sbx
	return sbx, nil
}

// forget drops id from the server's sandboxes after a kill; it reports
// whether the sandbox was the server's own.
func (s *Server) forget(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, own := s.own[id]
	delete(s.own, id)
	delete(s.others, id)
	return own
}

// isOwn reports whether id is one of the server's own sandboxes.
func (s *Server) isOwn(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.own[id]
	return ok
}
