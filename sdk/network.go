package rayito

import (
	"context"
	"fmt"
	"slices"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/sdk/internal/hook"
)

// NetworkPolicy is a sandbox's outbound network policy, enforced inside
// the sandbox by its daemon for the sandbox's users (never for rayd
// itself). An address is allowed unless DenyOut covers it and no
// AllowOut entry does: allow beats deny.
//
// AllowOut entries: a CIDR or an IP; "0.0.0.0/0", "::/0" or "ALL_TRAFFIC"
// for everything; an exact host name ("api.example.com") or a suffix
// ("*.example.com", the names below it), optionally with ":PORT" (by
// default 80 and 443). Host names are reached through the sandbox's
// egress proxy: tools that honour HTTP_PROXY/HTTPS_PROXY/ALL_PROXY (set
// for processes started after the policy) use it, and the others'
// connections on those ports are redirected to it, which lets through
// only the names the policy allows (TLS SNI or HTTP Host), resolved by the
// daemon and refused when they resolve to loopback, link-local, metadata
// or the sandbox's own addresses. Under such a policy, DNS answers only
// the allowed names; under deny-all DNS is blocked too. DenyOut entries
// are CIDRs or IPs. At most 256 entries, 64 of them hosts.
//
// The instance metadata service (169.254.169.254, fd00:ec2::254) is
// unreachable for the sandbox's users whatever AllowOut says, even
// "0.0.0.0/0" or "169.254.0.0/16".
type NetworkPolicy struct {
	AllowOut []string
	DenyOut  []string
	// EgressProxy chains the allowed host traffic through an operator
	// SOCKS5 proxy. Its credentials go to the sandbox only by RPC, never
	// in the creation payload, and the sandbox never returns them.
	EgressProxy *EgressProxy
}

// EgressProxy is an operator SOCKS5 proxy ("host:port").
type EgressProxy struct {
	Address  string
	Username string
	Password string
}

// DenyAllNetwork is the policy that lets nothing out (DNS included).
func DenyAllNetwork() NetworkPolicy {
	return NetworkPolicy{DenyOut: []string{"0.0.0.0/0", "::/0"}}
}

// NetworkState is the policy in force in a sandbox (never the proxy's
// credentials).
type NetworkState struct {
	AllowOut []string
	DenyOut  []string
	// EgressProxyConfigured says an operator proxy is chained.
	EgressProxyConfigured bool
	// Enforcement is how the policy is enforced: "none" (the sandbox
	// cannot enforce one), "guest_routes" (addresses only) or
	// "guest_routes_and_proxy" (addresses and host names).
	Enforcement string
	// LocalProxyPort is the egress proxy's port on 127.0.0.1 inside the
	// sandbox (0: none).
	LocalProxyPort int
}

// WithNetwork makes the sandbox enforce p from its start: the daemon
// installs deny-all, then p, before the sandbox is handed out. A sandbox
// that cannot enforce it is terminated and Create returns an error
// matching ErrUnimplemented: never a sandbox with its network open.
func WithNetwork(p NetworkPolicy) Option {
	return sandboxOption(func(c *config) {
		cp := cloneNetwork(p)
		c.network = &cp
	})
}

// WithAllowInternetAccess(false) closes the sandbox's outbound network:
// the platform gives it no internet route, and, unless WithNetwork gives
// a policy of its own, the daemon enforces deny-all inside it (DNS
// included). On AWS that inside enforcement is required (a microVM
// without an egress connector still inherits its image's), so a sandbox
// that cannot enforce it is terminated as with WithNetwork; the local
// platform closes the network itself (no route out at all), so there the
// inside layer is added where the daemon can program it and not required.
// true (the default) leaves the network open, unless WithNetwork says
// otherwise.
func WithAllowInternetAccess(allow bool) Option {
	return sandboxOption(func(c *config) {
		c.internet = allow
		c.denyInternet = !allow
	})
}

// WithInternetAccess is WithAllowInternetAccess.
//
// Deprecated: use WithAllowInternetAccess, the name E2B's SDKs use.
func WithInternetAccess(allow bool) Option { return WithAllowInternetAccess(allow) }

func cloneNetwork(p NetworkPolicy) NetworkPolicy {
	p.AllowOut, p.DenyOut = slices.Clone(p.AllowOut), slices.Clone(p.DenyOut)
	if p.EgressProxy != nil {
		e := *p.EgressProxy
		p.EgressProxy = &e
	}
	return p
}

// payloadNetwork is the run payload's network block for p (never the
// proxy's credentials).
func payloadNetwork(p *NetworkPolicy) *runpayload.Network {
	if p == nil {
		return nil
	}
	return &runpayload.Network{Enforce: true, AllowOut: p.AllowOut, DenyOut: p.DenyOut}
}

// UpdateNetwork replaces the sandbox's whole policy at once: live
// connections the new policy forbids are cut. A policy the sandbox
// refuses changes nothing (ErrInvalidArgument); one it cannot enforce is
// ErrUnimplemented; a failed install leaves deny-all in force.
func (s *Sandbox) UpdateNetwork(ctx context.Context, p NetworkPolicy) (*NetworkState, error) {
	resp, err := s.dp.network.UpdateNetwork(ctx, connect.NewRequest(&raydv1.UpdateNetworkRequest{Policy: policyMsg(p)}))
	if err != nil {
		return nil, rpcErr("update network", err)
	}
	return networkStateOf(resp.Msg.GetState()), nil
}

// Network returns the policy in force.
func (s *Sandbox) Network(ctx context.Context) (*NetworkState, error) {
	resp, err := s.dp.network.GetNetwork(ctx, connect.NewRequest(&raydv1.GetNetworkRequest{}))
	if err != nil {
		return nil, rpcErr("network", err)
	}
	return networkStateOf(resp.Msg.GetState()), nil
}

func policyMsg(p NetworkPolicy) *raydv1.NetworkPolicy {
	m := &raydv1.NetworkPolicy{AllowOut: p.AllowOut, DenyOut: p.DenyOut}
	if e := p.EgressProxy; e != nil {
		m.EgressProxy = &raydv1.EgressProxy{Address: e.Address}
		if e.Username != "" {
			m.EgressProxy.Username = &e.Username
		}
		if e.Password != "" {
			m.EgressProxy.Password = &e.Password
		}
	}
	return m
}

func networkStateOf(m *raydv1.NetworkState) *NetworkState {
	st := &NetworkState{AllowOut: m.GetAllowOut(), DenyOut: m.GetDenyOut(), EgressProxyConfigured: m.GetEgressProxyConfigured(), LocalProxyPort: int(m.GetLocalProxyPort())}
	switch m.GetEnforcement() {
	case raydv1.EgressEnforcement_EGRESS_ENFORCEMENT_GUEST_ROUTES:
		st.Enforcement = "guest_routes"
	case raydv1.EgressEnforcement_EGRESS_ENFORCEMENT_GUEST_ROUTES_AND_PROXY:
		st.Enforcement = "guest_routes_and_proxy"
	default:
		st.Enforcement = "none"
	}
	return st
}

// networkPlan is the policy Create installs and whether the sandbox must
// enforce it (see WithAllowInternetAccess).
func networkPlan(cfg *config) (p *NetworkPolicy, required bool, err error) {
	if cfg.network != nil {
		if cfg.denyInternet && len(cfg.network.AllowOut) > 0 {
			return nil, false, newError(ReasonInvalidArgument, "WithAllowInternetAccess(false) takes the sandbox's route out away, which WithNetwork's AllowOut needs: use WithNetwork alone (its DenyOut closes the rest)")
		}
		return cfg.network, true, nil
	}
	if cfg.denyInternet {
		deny := DenyAllNetwork()
		// The gateway and the placeholders' upstreams are reached by rayd
		// itself, over the sandbox's route out: the route stays and the
		// sandbox's daemon denies everything else, which it must then
		// enforce.
		return &deny, cfg.backend != BackendLocal || cfg.secretEgress(), nil
	}
	return nil, false, nil
}

// secretEgress reports whether rayd calls upstreams for the sandbox (its
// gateway routes or placeholders), which needs the route out.
// (hook.Egresser).
func (c *config) secretEgress() bool {
	for _, v := range c.exts {
		if e, ok := v.(hook.Egresser); ok && e.NeedsEgress() {
			return true
		}
	}
	return false
}

// checkRunNetwork runs once a created sandbox is ready, when a policy was
// asked for. The run payload installed it before /run answered, and the
// ready Health answer says how that went (run): in force is all Create
// needs. The RPC path (enforceNetwork) is taken only for what the payload
// cannot carry or tell: the operator proxy, whose credentials never
// travel in the payload; a failed install, for its precise error; and an
// older rayd that does not say. An error means the caller must terminate
// the sandbox; a policy that is not required may go unenforced.
func (s *Sandbox) checkRunNetwork(ctx context.Context, run raydv1.RunNetwork, p *NetworkPolicy, required bool) error {
	if p.EgressProxy == nil {
		switch {
		case run == raydv1.RunNetwork_RUN_NETWORK_IN_FORCE:
			return nil
		case run == raydv1.RunNetwork_RUN_NETWORK_UNAVAILABLE && !required:
			return nil
		case run == raydv1.RunNetwork_RUN_NETWORK_UNAVAILABLE:
			return newError(ReasonEgressUnavailable, fmt.Sprintf("sandbox %s cannot enforce a network policy (terminated rather than handed out with its network open)", s.id))
		}
	}
	return s.enforceNetwork(ctx, p, required)
}

// enforceNetwork runs after a created sandbox is ready, when a policy was
// asked for: it applies the policy again by RPC (a no-op when the run
// payload's install took; the operator proxy's credentials only travel
// this way) and checks that the sandbox enforces it. An error means the
// caller must terminate the sandbox; a policy that is not required may go
// unenforced.
func (s *Sandbox) enforceNetwork(ctx context.Context, p *NetworkPolicy, required bool) error {
	st, err := s.UpdateNetwork(ctx, *p)
	if !required && (ReasonOf(err) == ReasonEgressUnavailable || ReasonOf(err) == ReasonUnimplemented || (err == nil && st.Enforcement == "none")) {
		return nil
	}
	if err != nil {
		if ReasonOf(err) == ReasonEgressUnavailable || ReasonOf(err) == ReasonUnimplemented {
			return newError(ReasonEgressUnavailable, fmt.Sprintf("sandbox %s cannot enforce a network policy (terminated rather than handed out with its network open)", s.id), err)
		}
		return err
	}
	if st.Enforcement == "none" {
		return newError(ReasonEgressUnavailable, fmt.Sprintf("sandbox %s cannot enforce a network policy (terminated rather than handed out with its network open)", s.id))
	}
	return nil
}
