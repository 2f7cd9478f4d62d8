// Package network implements NetworkService, the sandbox's outbound
// network policy, one file per RPC. The kernel side (an nftables table and
// policy routing rules) is internal/netcfg, the policy itself
// internal/netpolicy, the proxy and the DNS forwarder that enforce host
// names internal/egress; this package ties them together and answers for
// them:
//
//   - At boot rayd probes whether it can program the network (CAP_NET_ADMIN
//     in its network namespace) and, when it can, installs the
//     unrestricted policy: IMDS is unreachable for sandbox uids from then
//     on, whatever a later policy allows (Health.imds_blocked).
//   - /run with a network block that enforces installs deny-all first,
//     then the block's policy, before /run answers; a sandbox that cannot
//     enforce it says so in Health (egress_enforcement NONE), and the SDK
//     terminates it rather than hand out an open sandbox.
//   - UpdateNetwork replaces the whole policy: parsed and checked first
//     (bad input changes nothing), then the proxy's and the DNS
//     forwarder's view (tunnels and names no longer allowed are cut at
//     once), then the firewall in one transaction (connections to
//     addresses no longer allowed are reset on their next packet). A
//     failed install leaves deny-all, everywhere.
//   - GetNetwork never returns the operator proxy's credentials.
//   - /resume re-verifies the rules (and reinstalls them if they drifted).
package network

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/rayd/internal/egress"
	"github.com/rayito-dev/rayito/rayd/internal/netpolicy"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

// Enforcer programs the sandbox's network namespace (netcfg.Reconciler).
type Enforcer interface {
	Probe(ctx context.Context) error
	Set(ctx context.Context, p netpolicy.Policy) error
	Verify(ctx context.Context) error
	IMDSBlocked() bool
}

// Proxy is the egress proxy's policy side (egress.Proxy).
type Proxy interface {
	SetPolicy(p egress.HostPolicy, upstream *egress.Upstream)
}

// DNS is the DNS forwarder's policy side (egress.DNS).
type DNS interface {
	SetPolicy(p egress.HostPolicy)
}

// Options configure the service.
type Options struct {
	State *sandbox.State
	// Enforcer programs the network; nil: rayd cannot (enforcement NONE).
	Enforcer Enforcer
	// Proxy and DNS enforce host rules; nil: host rules cannot be served
	// (enforcement GUEST_ROUTES: CIDR rules only).
	Proxy Proxy
	DNS   DNS
	// ProxyPort is the proxy's port on 127.0.0.1 (NetworkState's
	// local_proxy_port and the proxy variables of child processes).
	ProxyPort uint16
	Logger    *slog.Logger
}

// Service implements raydv1connect.NetworkServiceHandler.
type Service struct {
	opts Options
	log  *slog.Logger

	started chan struct{} // closed once Start has finished

	mu        sync.Mutex // serialises installs; guards the fields below
	available bool       // Probe passed
	policy    netpolicy.Policy
	upstream  *egress.Upstream
	intercept []InterceptHost   // SetIntercept
	run       raydv1.RunNetwork // what Install made of the run payload's policy
}

// InterceptHost is a destination the secret placeholders name: its
// connections go to the proxy's interceptor, and its name resolves
// through the DNS forwarder whatever the policy says.
type InterceptHost struct {
	Host string // lower case; a header rule's may be "*." and a name
	Port uint16
	// Grant: the host is reachable whatever the policy says, and its name
	// resolves (a placeholder's). A header rule's host is not granted.
	Grant bool
}

var _ raydv1connect.NetworkServiceHandler = (*Service)(nil)

// New returns the service; call Start once at boot.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{opts: opts, log: opts.Logger, started: make(chan struct{})}
}

// waitStarted waits for Start (the boot install) to finish.
func (s *Service) waitStarted(ctx context.Context) error {
	select {
	case <-s.started:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Start probes the network capability and, when rayd has it, installs the
// unrestricted policy (IMDS blocked). Call it once; it may run while rayd
// starts serving: Install (at /run, before any user process can start)
// and UpdateNetwork wait for it.
func (s *Service) Start(ctx context.Context) {
	defer close(s.started)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.Enforcer == nil {
		s.log.Info("network policy: not enforceable here (no network programming)")
		return
	}
	if err := s.opts.Enforcer.Probe(ctx); err != nil {
		s.log.Info("network policy: not enforceable here", "err_class", "no_capability")
		return
	}
	s.available = true
	if err := s.installLocked(ctx, netpolicy.Policy{}, nil); err != nil {
		s.log.Warn("network policy: the boot install failed; deny-all in force")
	}
}

// Install waits for the boot install, then applies the run payload's
// network block (nil or not enforcing: the boot policy stays): deny-all
// first, then its policy. It returns an
// error when the policy cannot be enforced or installed; Health then tells
// (enforcement NONE, or a deny-all left in force).
func (s *Service) Install(ctx context.Context, n *runpayload.Network) error {
	if err := s.waitStarted(ctx); err != nil {
		s.setRun(raydv1.RunNetwork_RUN_NETWORK_FAILED)
		return rpcerr.From(err)
	}
	if n == nil || !n.Enforce {
		s.setRun(raydv1.RunNetwork_RUN_NETWORK_NOT_REQUESTED)
		return nil
	}
	p, err := netpolicy.Parse(n.AllowOut, n.DenyOut)
	if err != nil {
		// A payload rayd cannot parse gets deny-all: closed, never open.
		p = denyAll()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.available {
		s.run = raydv1.RunNetwork_RUN_NETWORK_UNAVAILABLE
		return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_EGRESS_UNAVAILABLE, "rayd cannot program this sandbox's network")
	}
	s.run = raydv1.RunNetwork_RUN_NETWORK_FAILED
	if ierr := s.installLocked(ctx, denyAll(), nil); ierr != nil {
		return ierr
	}
	if err != nil {
		return policyErr(err)
	}
	if err := s.installLocked(ctx, p, nil); err != nil {
		return err
	}
	s.run = raydv1.RunNetwork_RUN_NETWORK_IN_FORCE
	return nil
}

func (s *Service) setRun(r raydv1.RunNetwork) {
	s.mu.Lock()
	s.run = r
	s.mu.Unlock()
}

// RunNetwork is what Install made of the run payload's policy (Health's
// run_network): NOT_REQUESTED before /run.
func (s *Service) RunNetwork() raydv1.RunNetwork {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == raydv1.RunNetwork_RUN_NETWORK_UNSPECIFIED {
		return raydv1.RunNetwork_RUN_NETWORK_NOT_REQUESTED
	}
	return s.run
}

// denyAll is the policy that lets nothing out.
func denyAll() netpolicy.Policy {
	p, _ := netpolicy.Parse(nil, []string{"0.0.0.0/0", "::/0"})
	return p
}

// installLocked installs p: the proxy and DNS first (cutting what p no
// longer allows), then the firewall. On failure deny-all is left
// everywhere and the error is EGRESS_UPDATE_FAILED.
func (s *Service) installLocked(ctx context.Context, p netpolicy.Policy, upstream *egress.Upstream) error {
	s.setHostsLocked(p, upstream)
	var ports []uint16
	for _, h := range s.intercept {
		ports = append(ports, h.Port)
	}
	if len(ports) > 0 {
		// Plain HTTP too: the proxy refuses a placeholder in clear, so it
		// never leaves the sandbox.
		ports = append(ports, 80)
	}
	if err := s.opts.Enforcer.Set(ctx, p.WithIntercept(ports)); err != nil {
		deny := denyAll()
		s.setHostsLocked(deny, nil)
		s.policy, s.upstream = deny, nil
		s.log.Warn("network policy: install failed; deny-all in force")
		return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_EGRESS_UPDATE_FAILED, "installing the network policy failed; deny-all is in force")
	}
	s.policy, s.upstream = p, upstream
	s.log.Info("network policy installed", "allow", len(p.AllowOut()), "deny", len(p.DenyOut()), "hosts", len(p.Hosts()), "upstream", upstream != nil)
	return nil
}

func (s *Service) setHostsLocked(p netpolicy.Policy, upstream *egress.Upstream) {
	hp := hostPolicy{p: p}
	for _, h := range s.intercept {
		if h.Grant {
			hp.names = append(hp.names, h.Host)
		}
	}
	if s.opts.Proxy != nil {
		s.opts.Proxy.SetPolicy(hp, upstream)
	}
	if s.opts.DNS != nil {
		s.opts.DNS.SetPolicy(hp)
	}
}

// hostPolicy is a policy as the proxy and the DNS forwarder ask it: names
// by their host rules (DNS: a name any rule matches, whatever its port),
// IP literals (a proxy request to an address) as the firewall decides
// them, so the proxy never lets through what the direct path would refuse.
type hostPolicy struct {
	p     netpolicy.Policy
	names []string // the intercepted hosts, which DNS answers whatever p says
}

var (
	_ egress.HostPolicy = hostPolicy{}
	_ egress.NamePolicy = hostPolicy{}
	_ egress.IPPolicy   = hostPolicy{}
)

func (h hostPolicy) AllowsHost(name string, port uint16) bool { return h.p.AllowsHost(name, port) }

func (h hostPolicy) AllowsName(name string) bool {
	if slices.Contains(h.names, name) {
		return true
	}
	for _, port := range h.p.HostPorts() {
		if h.p.AllowsHost(name, port) {
			return true
		}
	}
	return false
}

func (h hostPolicy) AllowsIP(addr netip.Addr, _ uint16) bool { return h.p.AllowsIP(addr) }

// SetIntercept sets the destinations the secret placeholders name (nil:
// none) and reinstalls the policy in force with their ports intercepted.
// It fails with EGRESS_UNAVAILABLE when rayd cannot program the network or
// run the proxy; a failed install leaves deny-all (EGRESS_UPDATE_FAILED).
func (s *Service) SetIntercept(ctx context.Context, hosts []InterceptHost) error {
	if err := s.waitStarted(ctx); err != nil {
		return rpcerr.From(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(hosts) > 0 && (!s.available || s.opts.Proxy == nil || s.opts.DNS == nil) {
		return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_EGRESS_UNAVAILABLE, "secret placeholders need rayd's egress proxy, which is not running")
	}
	if !s.available {
		return nil
	}
	if slices.Equal(s.intercept, hosts) {
		return nil
	}
	s.intercept = slices.Clone(hosts)
	return s.installLocked(ctx, s.policy, s.upstream)
}

// OnResume re-verifies the rules (reinstalling them when they drifted).
func (s *Service) OnResume(ctx context.Context) {
	if s.waitStarted(ctx) != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.available {
		return
	}
	if err := s.opts.Enforcer.Verify(ctx); err != nil {
		s.log.Warn("network policy: verify after resume failed", "err_class", "verify")
	}
}

// DisableHosts is called when the proxy or the DNS forwarder cannot serve:
// host rules are refused from then on (enforcement GUEST_ROUTES), and
// the policy in force keeps no host rule.
func (s *Service) DisableHosts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.Proxy, s.opts.DNS = nil, nil
	if s.available && len(s.policy.Hosts()) > 0 {
		_ = s.installLocked(context.Background(), denyAll(), nil)
	}
}

// Enforcement is Health's egress_enforcement.
func (s *Service) Enforcement() raydv1.EgressEnforcement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enforcementLocked()
}

func (s *Service) enforcementLocked() raydv1.EgressEnforcement {
	switch {
	case !s.available:
		return raydv1.EgressEnforcement_EGRESS_ENFORCEMENT_NONE
	case s.opts.Proxy == nil || s.opts.DNS == nil:
		return raydv1.EgressEnforcement_EGRESS_ENFORCEMENT_GUEST_ROUTES
	}
	return raydv1.EgressEnforcement_EGRESS_ENFORCEMENT_GUEST_ROUTES_AND_PROXY
}

// IMDSBlocked is Health's imds_blocked.
func (s *Service) IMDSBlocked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.available && s.opts.Enforcer.IMDSBlocked()
}

// ProxyEnv returns the proxy variables for processes started from now on:
// set while the policy has host rules (so tools that honour them use the
// proxy; the transparent redirection holds the others to the policy), with
// loopback and the allowed CIDRs in NO_PROXY. Nil otherwise.
func (s *Service) ProxyEnv() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.available || s.opts.Proxy == nil || len(s.policy.Hosts()) == 0 {
		return nil
	}
	url := "http://127.0.0.1:" + strconv.Itoa(int(s.opts.ProxyPort))
	noProxy := []string{"localhost", "127.0.0.1", "::1"}
	for _, c := range s.policy.AllowCIDRs() {
		noProxy = append(noProxy, c.String())
	}
	env := map[string]string{}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		env[k] = url
	}
	all := "socks5h://127.0.0.1:" + strconv.Itoa(int(s.opts.ProxyPort))
	env["ALL_PROXY"], env["all_proxy"] = all, all
	env["NO_PROXY"] = strings.Join(noProxy, ",")
	env["no_proxy"] = env["NO_PROXY"]
	return env
}

// state renders the policy in force.
func (s *Service) stateLocked() *raydv1.NetworkState {
	st := &raydv1.NetworkState{
		AllowOut:              s.policy.AllowOut(),
		DenyOut:               s.policy.DenyOut(),
		EgressProxyConfigured: s.upstream != nil,
		Enforcement:           s.enforcementLocked(),
	}
	if s.available && s.opts.Proxy != nil {
		st.LocalProxyPort = uint32(s.opts.ProxyPort)
	}
	return st
}

// policyErr is InvalidArgument naming the list, the index of the entry
// and the rule it breaks ("network policy: allow_out[3]: ..."), never the
// entry itself.
func policyErr(err error) error {
	var pe *netpolicy.Error
	if errors.As(err, &pe) {
		return rpcerr.Invalid("network policy: " + pe.Where())
	}
	return rpcerr.Invalid("network policy: invalid")
}

// validUpstream checks an operator SOCKS5 proxy: host:port whose host is
// neither an internal address nor a localhost name
// (egress.BlockedUpstreamHost: rayd, which the sandbox's rules do not
// hold, would dial it), and SOCKS5's 255-byte bounds on the credentials.
// Its errors never hold the address or the credentials. A name that
// passes is resolved and guarded again by the proxy at every dial.
func validUpstream(m *raydv1.EgressProxy) (*egress.Upstream, error) {
	if m == nil {
		return nil, nil
	}
	host, port, err := splitHostPort(m.GetAddress())
	if err != nil || host == "" || port == 0 {
		return nil, rpcerr.Invalid("egress_proxy.address must be host:port")
	}
	if egress.BlockedUpstreamHost(host) {
		return nil, rpcerr.Invalid("egress_proxy.address: loopback, unspecified, link-local and metadata addresses, the sandbox's own addresses and localhost names are not allowed")
	}
	if len(m.GetUsername()) > 255 || len(m.GetPassword()) > 255 || (m.GetPassword() != "" && m.GetUsername() == "") {
		return nil, rpcerr.Invalid("egress_proxy credentials: at most 255 bytes each, and a password needs a username")
	}
	return &egress.Upstream{Address: m.GetAddress(), Username: m.GetUsername(), Password: m.GetPassword()}, nil
}

func splitHostPort(addr string) (string, uint16, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	if strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r > '~' || r == '/' || r == '@' }) {
		return "", 0, strconv.ErrSyntax
	}
	p, err := strconv.ParseUint(port, 10, 16)
	return host, uint16(p), err
}
