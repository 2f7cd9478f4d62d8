package agentllm

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RemoteMCP is a remote MCP server (streamable HTTP) for the agent tests,
// with one tool, whisper, which answers "REMOTE-MCP:" and its text in
// lower case. Every request must carry the bearer key the secret gateway
// injects (401 otherwise).
type RemoteMCP struct {
	Key     string
	Calls   atomic.Int64
	handler http.Handler
}

// NewRemoteMCP returns the server.
func NewRemoteMCP(key string) *RemoteMCP {
	r := &RemoteMCP{Key: key}
	srv := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "whisper", Description: "Whispers the text back."}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, struct{}, error) {
		r.Calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "REMOTE-MCP:" + strings.ToLower(a.Text)}}}, struct{}{}, nil
	})
	r.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	return r
}

func (r *RemoteMCP) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	got := []byte(req.Header.Get("Authorization"))
	if subtle.ConstantTimeCompare(got, []byte("Bearer "+r.Key)) != 1 {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	r.handler.ServeHTTP(w, req)
}
