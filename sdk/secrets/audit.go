package secrets

import (
	"context"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/internal/hook"
)

// Mechanism is how a secret left the sandbox, in a AuditRecord.
type Mechanism string

// The mechanisms.
const (
	// ViaPlaceholder: a placeholder (WithPlaceholders) the
	// sandbox's egress proxy swapped for the secret.
	ViaPlaceholder Mechanism = "placeholder"
	// ViaHeaderRule: a header rule's header (UpdateHeaderRules).
	ViaHeaderRule Mechanism = "header_rule"
	// ViaGatewayRoute: a secret gateway route's header (WithGateways).
	ViaGatewayRoute Mechanism = "gateway_route"
)

// Outcome is what happened to the requests a AuditRecord
// counts.
type Outcome string

// The outcomes.
const (
	// Sent: the secret went to the host.
	Sent Outcome = "sent"
	// WrongHost: a placeholder was seen in a request to a host that
	// does not hold it; the request was refused and nothing substituted.
	WrongHost Outcome = "wrong_host"
	// PlainHTTP: a placeholder was seen in a plain-HTTP request to
	// its own host; refused (a secret never leaves in clear).
	PlainHTTP Outcome = "plain_http"
)

// AuditRecord counts the requests that carried one secret to one
// host with one outcome. It never holds a value or a placeholder string.
type AuditRecord struct {
	Mechanism Mechanism
	// Name is the placeholder's name (its env var) or the gateway route's
	// name; "" for a header rule.
	Name string
	// Header is the header a rule or a route set; "" for a placeholder.
	Header string
	// Host and Port are where the requests went (for WrongHost,
	// the host that does not hold the placeholder); Host is "" when the
	// sandbox's proxy could not tell.
	Host    string
	Port    int
	Outcome Outcome
	Count   uint64
	// Last is when the last request counted was made.
	Last time.Time
}

// AuditTrail is a sandbox's audit trail of its secrets.
type AuditTrail struct {
	// Records are sorted by mechanism, name, header, host, port and
	// outcome.
	Records []AuditRecord
	// Dropped counts requests not recorded because the trail was full
	// (1024 records).
	Dropped uint64
}

// Audit returns which secret went to which host since the sandbox
// started, through which mechanism and how many times, and the
// placeholders seen going to a host that does not hold them (refused,
// never substituted). A sandbox without secrets has an empty trail; a
// daemon too old to keep one answers rayito.ErrUnimplemented.
func Audit(ctx context.Context, sb *rayito.Sandbox) (*AuditTrail, error) {
	resp, err := hook.ConfigClient(sb).SecretAudit(ctx, connect.NewRequest(&raydv1.SecretAuditRequest{}))
	if err != nil {
		return nil, hook.RPCError("secret audit", err)
	}
	out := &AuditTrail{Dropped: resp.Msg.GetDropped(), Records: []AuditRecord{}}
	for _, r := range resp.Msg.GetRecords() {
		rec := AuditRecord{
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

var secretMechanisms = map[raydv1.SecretMechanism]Mechanism{
	raydv1.SecretMechanism_SECRET_MECHANISM_PLACEHOLDER:   ViaPlaceholder,
	raydv1.SecretMechanism_SECRET_MECHANISM_HEADER_RULE:   ViaHeaderRule,
	raydv1.SecretMechanism_SECRET_MECHANISM_GATEWAY_ROUTE: ViaGatewayRoute,
}

var secretOutcomes = map[raydv1.SecretOutcome]Outcome{
	raydv1.SecretOutcome_SECRET_OUTCOME_SENT:       Sent,
	raydv1.SecretOutcome_SECRET_OUTCOME_WRONG_HOST: WrongHost,
	raydv1.SecretOutcome_SECRET_OUTCOME_PLAIN_HTTP: PlainHTTP,
}
