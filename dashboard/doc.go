// Package dashboard is the root of Rayito's dashboard module: what lets
// an operator see and reach sandboxes from a browser.
//
//   - proxy: `rayito sandbox proxy`, a sandbox's HTTP port on a loopback
//     listener, with a token for that one port only, guarded against DNS
//     rebinding, cross-site requests and request smuggling.
//   - the local dashboard (`rayito dashboard`): a page and a JSON API on
//     127.0.0.1 with the caller's credentials, behind a single-use
//     startup token, a port-named session cookie and CSRF checks.
//   - the dashboard stack: a Lambda behind a Function URL that verifies a
//     Cognito access token before anything, with an audit row written
//     before every action.
//
// docs/dashboard.md is the guide; the security rules are
// shared/spec/security-model.md's (local proxy, local management
// dashboard, dashboard stack).
package dashboard
