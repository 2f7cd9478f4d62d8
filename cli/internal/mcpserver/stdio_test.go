package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// syncBuf is a bytes.Buffer safe for the server's writes and the test's
// reads.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStdioAnswersBeforeEOF: requests piped in before stdin ends are all
// answered, a slow one included, then the session ends.
func TestStdioAnswersBeforeEOF(t *testing.T) {
	t.Parallel()
	s := New(Options{OnlyOwn: true})
	type in struct{}
	mcp.AddTool(s.MCP(), &mcp.Tool{Name: "slow", Description: "sleeps"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ in) (*mcp.CallToolResult, struct{}, error) {
		time.Sleep(500 * time.Millisecond)
		return nil, struct{}{}, nil
	})
	reqs := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"kill","arguments":{"sandbox_id":"microvm-00000000-0000-4000-8000-000000000000"}}}`,
	}, "\n") + "\n"
	var out syncBuf
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.MCP().Run(ctx, s.StdioTransport(strings.NewReader(reqs), &out)); err != nil && ctx.Err() != nil {
		t.Fatalf("Run: %v", err)
	}
	ids := map[float64]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m struct {
			ID float64 `json:"id"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		ids[m.ID] = true
	}
	if !ids[1] || !ids[2] || !ids[3] {
		t.Errorf("answers to %v, want 1, 2 and 3:\n%s", ids, out.String())
	}
}
