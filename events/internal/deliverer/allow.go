package deliverer

import (
	"errors"
	"net"
	"net/netip"
	"net/url"

	"github.com/rayito-dev/rayito/proto/events"
)

// probeHost stands in for an allowed literal address while CheckURL
// checks the rest of a URL (any public address would do).
const probeHost = "93.184.216.34"

// CheckURL is the registration and delivery check of a webhook URL:
// events.CheckWebhookURL, except that a URL whose host is a literal
// address allow accepts (and BlockedAddr blocks) passes when everything
// else about it passes that check. With allow nil it is exactly
// events.CheckWebhookURL. Names are never let through: only the literal
// address the caller allowed. The error never quotes the URL.
func CheckURL(raw string, allow func(netip.Addr) bool) (*url.URL, error) {
	u, err := events.CheckWebhookURL(raw)
	if err == nil || allow == nil || !errors.Is(err, events.ErrBlockedURL) {
		return u, err
	}
	p, perr := url.Parse(raw)
	if perr != nil {
		return nil, err
	}
	a, aerr := netip.ParseAddr(p.Hostname())
	if aerr != nil || a.Zone() != "" || !allow(a) {
		return nil, err
	}
	probe := *p
	probe.Host = probeHost
	if port := p.Port(); port != "" {
		probe.Host = net.JoinHostPort(probeHost, port)
	}
	checked, cerr := events.CheckWebhookURL(probe.String())
	if cerr != nil {
		return nil, cerr
	}
	host := a.Unmap().String()
	if a.Unmap().Is6() {
		host = "[" + host + "]"
	}
	if port := checked.Port(); port != "" {
		host = net.JoinHostPort(a.Unmap().String(), port)
	}
	checked.Host = host
	return checked, nil
}

// blocked reports whether the deliverer must not dial a.
func (d *Deliverer) blocked(a netip.Addr) bool {
	if !events.BlockedAddr(a) {
		return false
	}
	return d.AllowAddr == nil || !d.AllowAddr(a)
}
