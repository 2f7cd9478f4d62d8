package gateway

import (
	"sort"
	"sync"
	"time"
)

// The mechanisms a secret leaves the sandbox through, in AuditRecord.
const (
	// AuditPlaceholder: a placeholder substituted in a request to its host.
	AuditPlaceholder = "placeholder"
	// AuditHeaderRule: a header rule's header added to a request.
	AuditHeaderRule = "header_rule"
	// AuditRoute: a route's header added to a request.
	AuditRoute = "gateway_route"
)

// The outcomes of an AuditRecord.
const (
	// AuditSent: the secret went to Host in the request.
	AuditSent = "sent"
	// AuditWrongHost: a placeholder was seen in a request to a host that
	// does not hold it; the request was refused and nothing substituted.
	AuditWrongHost = "wrong_host"
	// AuditPlainHTTP: a placeholder was seen in a plain-HTTP request to
	// its own host; refused (a secret never leaves in clear).
	AuditPlainHTTP = "plain_http"
)

// maxAuditEntries bounds the distinct records a Gateway keeps; a request
// that would add one more is counted in the dropped total only.
const maxAuditEntries = 1024

// AuditRecord counts requests that carried (or tried to carry) one secret
// to one host: never a value, never a placeholder string.
type AuditRecord struct {
	Mechanism string // AuditPlaceholder, AuditHeaderRule or AuditRoute
	// Name is the placeholder's name (its env var) or the route's name;
	// "" for a header rule.
	Name string
	// Header is the header a rule or a route set; "" for a placeholder.
	Header  string
	Host    string // lower-case; for a wrong host, the host the request went to
	Port    uint16
	Outcome string // AuditSent, AuditWrongHost or AuditPlainHTTP
	Count   uint64
	Last    time.Time // the last request counted
}

type auditKey struct {
	mech, name, header, host string
	port                     uint16
	outcome                  string
}

type auditEntry struct {
	count uint64
	last  time.Time
}

// auditLog is a Gateway's audit trail.
type auditLog struct {
	mu      sync.Mutex
	m       map[auditKey]*auditEntry
	dropped uint64
}

func (a *auditLog) add(now time.Time, k auditKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.m[k]
	if e == nil {
		if a.m == nil {
			a.m = map[auditKey]*auditEntry{}
		}
		if len(a.m) >= maxAuditEntries {
			a.dropped++
			return
		}
		e = &auditEntry{}
		a.m[k] = e
	}
	e.count++
	e.last = now
}

func (g *Gateway) audit(k auditKey) { g.auditLog.add(g.opts.Now(), k) }

// Audit returns the audit trail, sorted by mechanism, name, header, host,
// port and outcome, and how many requests were not recorded because the
// trail was full (1024 records).
func (g *Gateway) Audit() (records []AuditRecord, dropped uint64) {
	a := &g.auditLog
	a.mu.Lock()
	for k, e := range a.m {
		records = append(records, AuditRecord{Mechanism: k.mech, Name: k.name, Header: k.header, Host: k.host, Port: k.port,
			Outcome: k.outcome, Count: e.count, Last: e.last})
	}
	dropped = a.dropped
	a.mu.Unlock()
	sort.Slice(records, func(i, j int) bool {
		x, y := records[i], records[j]
		switch {
		case x.Mechanism != y.Mechanism:
			return x.Mechanism < y.Mechanism
		case x.Name != y.Name:
			return x.Name < y.Name
		case x.Header != y.Header:
			return x.Header < y.Header
		case x.Host != y.Host:
			return x.Host < y.Host
		case x.Port != y.Port:
			return x.Port < y.Port
		}
		return x.Outcome < y.Outcome
	})
	return records, dropped
}

// auditHeaders records a rule's or a route's headers sent to host:port.
func (g *Gateway) auditHeaders(mech, name string, hs []injected, host string, port uint16) {
	for _, h := range hs {
		g.audit(auditKey{mech: mech, name: name, header: h.name, host: host, port: port, outcome: AuditSent})
	}
}

// CheckPlainTo is CheckPlain for a request to host:port (port 0 = 80),
// and records each placeholder found in the audit trail: AuditPlainHTTP
// when host:port is its own, AuditWrongHost otherwise.
func (g *Gateway) CheckPlainTo(head []byte, host string, port uint16) bool {
	if port == 0 {
		port = 80
	}
	host = normHost(host)
	found := g.checkPlain(head)
	for _, e := range found {
		outcome := AuditWrongHost
		if e.cfg.host == host {
			outcome = AuditPlainHTTP
		}
		g.audit(auditKey{mech: AuditPlaceholder, name: e.cfg.name, host: host, port: port, outcome: outcome})
	}
	return len(found) > 0
}
