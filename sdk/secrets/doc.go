// Package secrets holds the SDK's secrets: the stores (MemoryStore,
// LocalStore, AWSStore over AWS Secrets Manager), the Cache they are
// read through, the options that put them in a sandbox (WithSecrets for
// environment variables; WithGateways, WithPlaceholders and
// WithHeaderRules for the egress proxy that adds them to requests the
// sandbox never sees them in), Refresh, UpdateHeaderRules and the Audit
// trail. Only programs that import this package link Secrets Manager.
//
//	sbx, err := rayito.Create(ctx,
//		secrets.WithGateways(secrets.AnthropicGateway(secrets.Ref{Name: "anthropic"})))
//	url := sbx.Gateway("anthropic").URL()
//
// The package is built on the root package's public API and its
// extension hook (sdk/internal/hook); the root never imports it.
package secrets
