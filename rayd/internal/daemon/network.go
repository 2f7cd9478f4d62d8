package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/rayito-dev/rayito/proto/limits"
	"github.com/rayito-dev/rayito/rayd/internal/egress"
	"github.com/rayito-dev/rayito/rayd/internal/netcfg"
	"github.com/rayito-dev/rayito/rayd/internal/service/network"
)

// Values of Config.Egress (-egress).
const (
	EgressAuto = "auto"
	EgressOn   = "on"
	EgressOff  = "off"
)

// egressEnabled reports whether rayd programs the sandbox's network: with
// -egress on (a microVM image), or auto (the default) when the platform
// says rayd runs in a sandbox's own network namespace (-isolation full or
// rootless). Never otherwise: a rayd started on a machine by hand must not
// rewrite that machine's firewall for its users.
func (c Config) egressEnabled() bool {
	switch c.Egress {
	case EgressOn:
		return true
	case EgressOff:
		return false
	}
	return c.Isolation == "full" || c.Isolation == "rootless"
}

// egressParts are the network service's parts that need serving.
type egressParts struct {
	proxy *egress.Proxy
	dns   *egress.DNS
}

// wireNetwork builds the network service: the reconciler, the proxy and
// the DNS forwarder when rayd programs the network, nothing otherwise
// (enforcement NONE).
func (d *Daemon) wireNetwork(cfg Config, log *slog.Logger) {
	opts := network.Options{State: d.State, ProxyPort: limits.EgressProxyPort, Logger: log}
	if cfg.egressEnabled() {
		rec, err := netcfg.New(netcfg.Options{ProxyPort: limits.EgressProxyPort, DNSPort: limits.DNSForwarderPort, Logger: log})
		if err != nil {
			log.Warn("network policy: no reconciler", "err_class", "setup")
		} else {
			opts.Enforcer = rec
			d.egress = &egressParts{
				proxy: egress.New(egress.Options{Logger: log}),
				dns:   egress.NewDNS(egress.DNSOptions{Logger: log}),
			}
			opts.Proxy, opts.DNS = d.egress.proxy, d.egress.dns
		}
	}
	d.Network = network.New(opts)
}

// serveEgress probes and installs the boot policy (in the background),
// and serves the proxy
// and the DNS forwarder on the sandbox's loopback (127.0.0.1, and ::1
// where the namespace has it: the rules redirect IPv6 there) until ctx
// ends. When 127.0.0.1 cannot be bound, host rules are refused from then
// on (the service's DisableHosts).
func (d *Daemon) serveEgress(ctx context.Context) {
	// The boot install runs beside rayd's start (it takes about as long
	// as an UpdateNetwork): /run waits for it before it answers, so no
	// user process ever starts before IMDS is blocked.
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		d.Network.Start(sctx)
	}()
	if d.egress == nil {
		return
	}
	var closers []io.Closer
	listen := func(ip netip.Addr) error {
		var lc net.ListenConfig
		proxyLn, err := lc.Listen(ctx, "tcp", netip.AddrPortFrom(ip, limits.EgressProxyPort).String())
		if err != nil {
			return err
		}
		closers = append(closers, proxyLn)
		dnsAddr := netip.AddrPortFrom(ip, limits.DNSForwarderPort).String()
		udp, err := lc.ListenPacket(ctx, "udp", dnsAddr)
		if err != nil {
			return err
		}
		closers = append(closers, udp)
		tcp, err := lc.Listen(ctx, "tcp", dnsAddr)
		if err != nil {
			return err
		}
		closers = append(closers, tcp)
		go func() { _ = d.egress.proxy.Serve(proxyLn) }()
		go func() { _ = d.egress.dns.ServeUDP(udp) }()
		go func() { _ = d.egress.dns.ServeTCP(tcp) }()
		return nil
	}
	if err := listen(netip.IPv6Loopback()); err != nil {
		d.log.Info("egress proxy: no IPv6 loopback", "err_class", "listen")
	}
	if err := listen(netip.AddrFrom4([4]byte{127, 0, 0, 1})); err != nil {
		d.log.Warn("egress proxy: cannot listen on 127.0.0.1", "proxy_port", limits.EgressProxyPort, "dns_port", limits.DNSForwarderPort)
		for _, c := range closers {
			_ = c.Close()
		}
		d.Network.DisableHosts()
		return
	}
	go func() {
		<-ctx.Done()
		_ = d.egress.proxy.Close()
		_ = d.egress.dns.Close()
		for _, c := range closers {
			_ = c.Close()
		}
	}()
}
