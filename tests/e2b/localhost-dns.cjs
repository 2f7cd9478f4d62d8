// Test harness (node --require): names under .localhost resolve to
// loopback, as RFC 6761 says and as systemd-resolved, curl and browsers do;
// glibc alone (this project's CI machines) does not. The E2B gateway's
// default TLS domain, e2b.localhost, needs it; nothing else is changed.
const dns = require('node:dns')

const lookup = dns.lookup
dns.lookup = function (hostname, options, callback) {
  if (typeof hostname === 'string' && /(^|\.)localhost\.?$/i.test(hostname)) {
    if (typeof options === 'function') {
      callback = options
      options = {}
    }
    if (typeof options === 'number') options = { family: options }
    if (options && options.all) {
      return process.nextTick(callback, null, [{ address: '127.0.0.1', family: 4 }])
    }
    return process.nextTick(callback, null, '127.0.0.1', 4)
  }
  return lookup.apply(this, arguments)
}
