package main

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedModules is rayd's dependency budget. The AWS SDK in particular
// stays out (ARCHITECTURE.md §2): growing this list is a reviewed decision.
var allowedModules = map[string]bool{
	"github.com/rayito-dev/rayito/rayd":  true,
	"github.com/rayito-dev/rayito/proto": true,
	// The secret gateway (issue 14): our own module, standard library
	// only.
	"github.com/rayito-dev/rayito/gateway": true,
	"connectrpc.com/connect":               true,
	"google.golang.org/protobuf":           true,
	"golang.org/x/sys":                     true,
	// The Jupyter wire protocol (internal/kernel, issue 12): a pure-Go
	// ZeroMQ, and the x/ modules it links (errgroup; text encodings).
	"github.com/go-zeromq/zmq4": true,
	"golang.org/x/sync":         true,
	"golang.org/x/text":         true,
	// Stream and error contents of kernel messages (internal/kernel):
	// an escape-aware JSON parser, 3 MB in under 1 ms where
	// encoding/json takes 36 ms; no dependencies of its own.
	"github.com/valyala/fastjson": true,
	// The network policy (internal/netcfg, issue 13): nftables and policy
	// routing over netlink (no shelling out to nft or ip), and the netlink
	// library they share; golang.org/x/net for the egress proxy's SOCKS5
	// chaining and the DNS forwarder's message parser.
	"github.com/google/nftables":     true,
	"github.com/mdlayher/netlink":    true,
	"github.com/mdlayher/socket":     true,
	"github.com/vishvananda/netlink": true,
	"github.com/vishvananda/netns":   true,
	"golang.org/x/net":               true,
}

func TestDependencyBudget(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		if !seen[m] && !allowedModules[m] {
			t.Errorf("rayd links module %s, which is outside its dependency budget", m)
		}
		seen[m] = true
	}
	if !seen["connectrpc.com/connect"] {
		t.Fatalf("go list output looks wrong: %q", out)
	}
}
