package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rayito-dev/rayito/sdk/secrets"
)

// E2B Secrets: network.rules {host: [{transform: {headers}}]} makes the
// sandbox's egress add (or replace) those headers on its HTTPS requests to
// the host. They map onto Rayito's header rules: rayd's egress proxy
// terminates the TLS of those hosts with the sandbox's own CA and sets the
// headers; the sandbox never sees the values. A rule grants no access, as
// on E2B: allowOut decides whether the host is reached.

// maxHeaderRules is the most hosts network.rules may name (rayd's cap).
const maxHeaderRules = 16

// headerRule is the headers of one host of network.rules.
type headerRule struct {
	Host    string
	Headers map[string]string
}

type ruleReq struct {
	Transform *struct {
		Headers map[string]string `json:"headers"`
	} `json:"transform"`
}

// parseRules reads network.rules: a host (lower-cased; an exact name or
// "*." and one) to its rules, whose headers are merged in order (a later
// one wins). A host whose rules name no header is dropped. The values are
// checked by rayd (a message naming the field, never a value).
func parseRules(raw json.RawMessage) ([]headerRule, error) {
	if !present(raw) {
		return nil, nil
	}
	var in map[string][]ruleReq
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("network.rules must map a host to a list of rules {transform: {headers}}")
	}
	var out []headerRule
	for _, host := range slices.Sorted(maps.Keys(in)) {
		h := strings.ToLower(strings.TrimSuffix(host, "."))
		if h == "" || h == "*" || strings.Count(h, "*") > 1 || strings.Contains(h, "*") && !strings.HasPrefix(h, "*.") {
			return nil, fmt.Errorf("network.rules: %q is not a host name or *. and one", host)
		}
		headers := map[string]string{}
		for _, r := range in[host] {
			if r.Transform != nil {
				maps.Copy(headers, r.Transform.Headers)
			}
		}
		if len(headers) > 0 {
			out = append(out, headerRule{Host: h, Headers: headers})
		}
	}
	if len(out) > maxHeaderRules {
		return nil, fmt.Errorf("network.rules: at most %d hosts", maxHeaderRules)
	}
	return out, nil
}

// sdkHeaderRules turns rules into the SDK's, their values in a store of
// their own (this process's memory only).
func sdkHeaderRules(ctx context.Context, rules []headerRule) (secrets.Store, []secrets.HeaderRule, error) {
	store := secrets.NewMemoryStore()
	out := make([]secrets.HeaderRule, 0, len(rules))
	for i, r := range rules {
		hs := map[string]secrets.HeaderValue{}
		for j, name := range slices.Sorted(maps.Keys(r.Headers)) {
			ref := secrets.Ref{Name: fmt.Sprintf("e2b-rule-%d-%d", i, j)}
			if _, err := store.CreateSecret(ctx, ref.Name, []byte(r.Headers[name])); err != nil {
				return nil, nil, fmt.Errorf("network.rules[%q].headers[%q]: the value is empty or too long", r.Host, name)
			}
			hs[name] = secrets.Plain(ref)
		}
		out = append(out, secrets.HeaderRule{Host: r.Host, Headers: hs})
	}
	return store, out, nil
}
