package rayito

import (
	"context"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// SecretMechanism is how a secret left the sandbox, in a SecretAuditRecord.
type SecretMechanism string

// The mechanisms.
const (
	// SecretViaPlaceholder: a placeholder (WithSecretPlaceholders) the
	// sandbox's egress proxy swapped for the secret.
	SecretViaPlaceholder SecretMechanism = "placeholder"
	// SecretViaHeaderRule: a header rule's header (UpdateHeaderRules).
	SecretViaHeaderRule SecretMechanism = "header_rule"
	// SecretViaGatewayRoute: a secret gateway route's header (WithGateways).
	SecretViaGatewayRoute SecretMechanism = "gateway_route"
)

// SecretOutcome is what happened to the requests a SecretAuditRecord
// counts.
type SecretOutcome string

// The outcomes.
const (
	// SecretSent: the secret went to the host.
	SecretSent SecretOutcome = "sent"
	// SecretWrongHost: a placeholder was seen in a request to a host that
	// does not hold it; the request was refused and nothing substituted.
	SecretWrongHost SecretOutcome = "wrong_host"
	// SecretPlainHTTP: a placeholder was seen in a plain-HTTP request to
	// its own host; refused (a secret never leaves in clear).
	SecretPlainHTTP SecretOutcome = "plain_http"
)

// SecretAuditRecord counts the requests that carried one secret to one
// host with one outcome. It never holds a value or a placeholder string.
type SecretAuditRecord struct {
	Mechanism SecretMechanism
	// Name is the placeholder's name (its env var) or the gateway route's
	// name; "" for a header rule.
	Name string
	// Header is the header a rule or a route set; "" for a placeholder.
	Header string
	// Host and Port are where the requests went (for SecretWrongHost,
	// the host that does not hold the placeholder); Host is "" when the
	// sandbox's proxy could not tell.
	Host    string
	Port    int
	Outcome SecretOutcome
	Count   uint64
	// Last is when the last request counted was made.
	Last time.Time
}

// SecretAudit is a sandbox's audit trail of its secrets.
type SecretAudit struct {
	// Records are sorted by mechanism, name, header, host, port and
	// outcome.
	Records []SecretAuditRecord
	// Dropped counts requests not recorded because the trail was full
	// (1024 records).
	Dropped uint64
}

// SecretAudit returns which secret went to which host since the sandbox
// started, through which mechanism and how many times, and the
// placeholders seen going to a host that does not hold them (refused,
// never substituted). A sandbox without secrets has an empty trail; a
// daemon too old to keep one answers ErrUnimplemented.
func (s *Sandbox) SecretAudit(ctx context.Context) (_ *SecretAudit, err error) {
	ctx, sp := s.span(ctx, "SecretAudit")
	defer func() { sp.end(err) }()
	resp, err := s.dp.config.SecretAudit(ctx, connect.NewRequest(&raydv1.SecretAuditRequest{}))
	if err != nil {
		return nil, rpcErr("secret audit", err)
	}
	out := &SecretAudit{Dropped: resp.Msg.GetDropped(), Records: []SecretAuditRecord{}}
	for _, r := range resp.Msg.GetRecords() {
		rec := SecretAuditRecord{
			Mechanism: secretMechanisms[r.GetMechanism()], Name: r.GetName(), Header: r.GetHeader(),
			Host: r.GetHost(), Port: int(r.GetPort()), Outcome: secretOutcomes[r.GetOutcome()], Count: r.GetCount(),
		}
		if ms := r.GetLastUnixMs(); ms > 0 {
			rec.Last = time.UnixMilli(ms)
		}
		out.Records = append(out.Records, rec)
	}
	return out, nil
}

var secretMechanisms = map[raydv1.SecretMechanism]SecretMechanism{
	raydv1.SecretMechanism_SECRET_MECHANISM_PLACEHOLDER:   SecretViaPlaceholder,
	raydv1.SecretMechanism_SECRET_MECHANISM_HEADER_RULE:   SecretViaHeaderRule,
	raydv1.SecretMechanism_SECRET_MECHANISM_GATEWAY_ROUTE: SecretViaGatewayRoute,
}

var secretOutcomes = map[raydv1.SecretOutcome]SecretOutcome{
	raydv1.SecretOutcome_SECRET_OUTCOME_SENT:       SecretSent,
	raydv1.SecretOutcome_SECRET_OUTCOME_WRONG_HOST: SecretWrongHost,
	raydv1.SecretOutcome_SECRET_OUTCOME_PLAIN_HTTP: SecretPlainHTTP,
}
