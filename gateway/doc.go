// Package gateway is the secret gateway that rayd runs inside a sandbox:
// it lets sandbox code use a secret without being able to read it.
//
// The gateway runs in rayd (root); sandbox code (uid 1000) only ever sees
// loopback ports or placeholder strings. It uses the Go standard library
// only: net/http serves the client side and one httputil.ReverseProxy
// (Rewrite, FlushInterval -1) with one http.Transport per upstream forwards
// every request of both modes.
//
// # Routes (explicit)
//
// Each Route listens on its own port 127.0.0.1:PORT. Sandbox code calls
// http://127.0.0.1:PORT/path and the gateway forwards the request over TLS
// to the route's fixed upstream https://host[:port], injecting the route's
// secret headers. Per request, in this order:
//
//  1. Path check on the raw request-target (RequestURI up to '?'): only
//     origin-form is accepted (absolute-form, authority-form and "*" are
//     refused), and the path must pass CheckPath. The path is refused,
//     never normalized; the raw path is forwarded exactly as received and
//     the query string unchanged. Refusal: 403 not_allowed, nothing dialed.
//  2. Method and path rules (Rule), matched against the once-decoded path:
//     403 not_allowed.
//  3. Rate limit, a token bucket per route (capacity RatePerMinute, refilled
//     at RatePerMinute/60 per second): 429 rate_limited with Retry-After.
//  4. Request headers: the sandbox's copies of injected headers (any case),
//     Host (set to the upstream's authority), hop-by-hop and Proxy-*
//     headers and Forwarded/X-Forwarded-* are removed; nothing is added but
//     the injected headers (Prefix+Secret).
//  5. Upstream: the host is resolved with Options.Resolve and every address
//     goes through the address guard (Options.Blocked, default
//     DefaultBlocked); if any address is refused nothing is dialed
//     (502 upstream_error). Then dial, and TLS with ServerName = host
//     against Options.RootCAs. Connect (resolve + dial + handshake) over
//     10 s or no response head within 600 s: 504 upstream_timeout; any
//     other failure: 502 upstream_error. Connections are kept alive per
//     route.
//  6. Response: headers named like an injected header, headers whose name
//     or value contains a vaulted secret (any secret of 8 bytes or more of
//     the route), hop-by-hop headers and informational (1xx) responses are
//     dropped; trailers are scrubbed the same way. The body streams through
//     unchanged and is flushed as it arrives (server-sent events work).
//
// A refusal is the class's status code with Content-Type application/json
// and the body {"error":"<class>"}. Requests whose request line net/http
// itself cannot parse (for example a path not starting with '/', or a bad
// percent-encoding) are answered 400 by net/http before any check; nothing
// is dialed for them either.
//
// SetRoutes validates the whole set first and keeps the previous set running
// on any error. A route keeping its name keeps its listener and port and
// gets its new values, rules and rate atomically; a removed route closes its
// listener and its idle client and upstream connections (in-flight requests
// finish); a new route listens on a fresh port.
//
// # Placeholders (transparent)
//
// The sandbox sees only a placeholder string (for example in an environment
// variable). rayd's egress proxy hands ServeIntercepted the client
// connections whose TLS destination host has a placeholder (see
// Intercepts). The gateway terminates TLS with a leaf certificate minted for
// that host by its per-sandbox CA (ECDSA P-256, key in memory only, see
// CACertPEM; ALPN offers only http/1.1) and serves HTTP/1.1 requests. Per
// request it looks for every placeholder occurring in the request line, the
// Host or any header value, including inside Basic credentials (decoded,
// replaced in user or password, re-encoded):
//
//   - no placeholder: the request is forwarded unchanged to the destination
//     (no path check, origin-form only);
//   - otherwise every placeholder found must belong to this host and port,
//     or the request is refused with 403 placeholder_blocked (counted as
//     Blocked on that placeholder) and nothing is forwarded; then the path
//     check (403 not_allowed), each placeholder's rules (403 not_allowed)
//     and rate (429), and finally every occurrence in a header value is
//     replaced by the secret (never in the body; an occurrence in the
//     request line is forwarded unchanged) and the request is forwarded
//     with the same upstream rules, guard and response scrubbing as a route
//     (the scrubbed values are the secrets of the destination's
//     placeholders; headers that had a replacement are also dropped from
//     the response by name).
//
// CheckPlain lets the proxy refuse plain http:// requests that carry a
// placeholder.
//
// # What is never revealed
//
// Logs, errors (ConfigError names only the field and index) and status carry
// route names, placeholder names (environment variable names), error classes
// and counts: never secret values, placeholder strings, header values, host
// names, paths, URLs or bodies. Header, Route and Placeholder print without
// their secrets (String, GoString, LogValue).
//
// # Residual risk
//
// The response body comes back uninspected: an allowed endpoint that echoes
// request headers into its response body (a debugging or "echo" endpoint,
// an error message quoting the Authorization header, ...) hands the secret
// to the sandbox. Rules should allow only the endpoints a sandbox needs.
// Likewise the request body is forwarded uninspected, so a request that an
// upstream reflects somewhere the sandbox can read (a stored document, a
// public page) can exfiltrate what the upstream makes of it; and secrets
// shorter than 8 bytes are not scrubbed from response headers.
package gateway
