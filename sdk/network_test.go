package rayito

import (
	"errors"
	"slices"
	"testing"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// TestNetworkPlan: which policy Create installs and whether the sandbox
// must enforce it.
func TestNetworkPlan(t *testing.T) {
	allow := NetworkPolicy{AllowOut: []string{"example.com"}, DenyOut: DenyAllNetwork().DenyOut}
	for _, tc := range []struct {
		name     string
		opts     []Option
		policy   *NetworkPolicy
		required bool
		err      error
	}{
		{"none", nil, nil, false, nil},
		{"WithNetwork", []Option{WithNetwork(allow)}, &allow, true, nil},
		{"no internet, local", []Option{WithBackend(BackendLocal), WithAllowInternetAccess(false)}, ptr(DenyAllNetwork()), false, nil},
		{"no internet, aws", []Option{WithBackend(BackendAWS), WithAllowInternetAccess(false)}, ptr(DenyAllNetwork()), true, nil},
		{"no internet and deny-all policy", []Option{WithAllowInternetAccess(false), WithNetwork(DenyAllNetwork())}, ptr(DenyAllNetwork()), true, nil},
		{"no internet and an allow list", []Option{WithNetwork(allow), WithAllowInternetAccess(false)}, nil, false, ErrInvalidArgument},
		{"the deprecated name", []Option{WithBackend(BackendAWS), WithInternetAccess(false)}, ptr(DenyAllNetwork()), true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, required, err := networkPlan(newConfig(tc.opts))
			if !errors.Is(err, tc.err) || required != tc.required || (p == nil) != (tc.policy == nil) ||
				(p != nil && (!slices.Equal(p.AllowOut, tc.policy.AllowOut) || !slices.Equal(p.DenyOut, tc.policy.DenyOut))) {
				t.Fatalf("got %+v %v %v", p, required, err)
			}
		})
	}
}

// TestWithNetworkCopies: the option keeps its own copy of the policy.
func TestWithNetworkCopies(t *testing.T) {
	p := NetworkPolicy{AllowOut: []string{"a.example"}, EgressProxy: &EgressProxy{Address: "proxy:1080", Password: "secret"}}
	cfg := newConfig([]Option{WithNetwork(p)})
	p.AllowOut[0], p.EgressProxy.Password = "changed", "changed"
	if cfg.network.AllowOut[0] != "a.example" || cfg.network.EgressProxy.Password != "secret" {
		t.Fatalf("the option shares the caller's policy: %+v", cfg.network)
	}
	if payloadNetwork(cfg.network).AllowOut[0] != "a.example" {
		t.Fatal("payload")
	}
}

// TestNetworkMessages: the wire forms (the proxy's credentials only in
// the request, the enforcement names).
func TestNetworkMessages(t *testing.T) {
	m := policyMsg(NetworkPolicy{AllowOut: []string{"x.example"}, EgressProxy: &EgressProxy{Address: "p:1", Username: "u", Password: "pw"}})
	if m.GetEgressProxy().GetUsername() != "u" || m.GetEgressProxy().GetPassword() != "pw" {
		t.Fatalf("request %v", m)
	}
	for e, want := range map[raydv1.EgressEnforcement]string{
		raydv1.EgressEnforcement_EGRESS_ENFORCEMENT_NONE:                   "none",
		raydv1.EgressEnforcement_EGRESS_ENFORCEMENT_UNSPECIFIED:            "none",
		raydv1.EgressEnforcement_EGRESS_ENFORCEMENT_GUEST_ROUTES:           "guest_routes",
		raydv1.EgressEnforcement_EGRESS_ENFORCEMENT_GUEST_ROUTES_AND_PROXY: "guest_routes_and_proxy",
	} {
		if got := networkStateOf(&raydv1.NetworkState{Enforcement: e}).Enforcement; got != want {
			t.Errorf("%v: %q", e, got)
		}
	}
}

func ptr[T any](v T) *T { return &v }
