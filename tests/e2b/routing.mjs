// The E2B gateway as E2B's cloud is reached: only E2B_DOMAIN and
// E2B_API_KEY (and the gateway's CA in NODE_EXTRA_CA_CERTS), no
// E2B_API_URL or E2B_SANDBOX_URL, so that the official SDK calls
// https://api.<domain> and https://<port>-<id>.<domain> itself, and the
// links it makes (getHost, downloadUrl, uploadUrl) are fetched by plain
// fetch() without any E2B header. With a template that allows root
// (the gateway's --template base=local-root): user 'root' and sudo.
// tests/e2b_routing_test.go runs it (node --require ./localhost-dns.cjs).
//
// Each step prints PASS or FAIL <step>: <why>; the exit status is 1 if any
// step failed.

import { Sandbox } from 'e2b'

let failed = 0
async function step(name, fn) {
  try {
    await fn()
    console.log(`PASS ${name}`)
  } catch (e) {
    failed++
    console.log(`FAIL ${name}: ${e?.stack ?? e}`)
  }
}
function check(cond, what) {
  if (!cond) throw new Error(what)
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// fetch with retries while the sandbox's server starts.
async function fetchUntil(url, init, want) {
  let res
  for (let i = 0; i < 40; i++) {
    res = await fetch(url, init)
    if (res.status === want) return res
    await res.arrayBuffer()
    await sleep(250)
  }
  return res
}

const domain = process.env.E2B_DOMAIN
const sbx = await Sandbox.create({ timeoutMs: 300_000 })
const sandboxes = [sbx]
try {
  await step('domain from the gateway', async () => {
    check(sbx.sandboxDomain === domain, `sandboxDomain ${sbx.sandboxDomain}, want ${domain}`)
    check(sbx.getHost(8000) === `8000-${sbx.sandboxId}.${domain}`, `getHost ${sbx.getHost(8000)}`)
  })

  await step('getHost: a web server in the sandbox', async () => {
    await sbx.commands.run('python -m http.server 8000', { background: true, cwd: '/home/user' })
    await sbx.files.write('/home/user/page.html', 'served from the sandbox')
    const res = await fetchUntil(`https://${sbx.getHost(8000)}/page.html`, {}, 200)
    check(res.status === 200, `status ${res.status}`)
    check((await res.text()) === 'served from the sandbox', 'body')
  })

  await step('presigned download and upload links', async () => {
    await sbx.files.write('hello.txt', 'hello world')
    const down = await sbx.downloadUrl('hello.txt', { useSignatureExpiration: 60 })
    check(new URL(down).host === `49983-${sbx.sandboxId}.${domain}`, `download link host ${new URL(down).host}`)
    let res = await fetch(down)
    check(res.status === 200 && (await res.text()) === 'hello world', `download ${res.status}`)
    const up = await sbx.uploadUrl('up.txt')
    const form = new FormData()
    form.append('file', 'uploaded content')
    res = await fetch(up, { method: 'POST', body: form })
    check(res.status === 200, `upload ${res.status} ${await res.text()}`)
    check((await sbx.files.read('up.txt')) === 'uploaded content', 'uploaded content')
    const expired = await sbx.downloadUrl('hello.txt', { useSignatureExpiration: -10 })
    res = await fetch(expired)
    const body = await res.json()
    check(res.status === 401 && body.message === 'signature is already expired', `expired link ${res.status} ${JSON.stringify(body)}`)
  })

  await step('user root and sudo', async () => {
    await sbx.files.write('/root/secret.txt', 'root only', { user: 'root' })
    let r = await sbx.commands.run('cat /root/secret.txt', { user: 'root' })
    check(r.stdout === 'root only', `as root: ${r.stdout}`)
    r = await sbx.commands.run('sudo cat /root/secret.txt && echo && id -un && sudo id -un')
    check(r.stdout === 'root only\nuser\nroot\n', `sudo: ${JSON.stringify(r.stdout)}`)
    const link = await sbx.downloadUrl('secret.txt', { user: 'root', useSignatureExpiration: 60 })
    const res = await fetch(link)
    check(res.status === 200 && (await res.text()) === 'root only', `root's link ${res.status}`)
    await sbx.commands.run('echo $FOO', { envs: { FOO: 'bar' } })
    r = await sbx.commands.run('sudo echo "x$FOO"')
    check(r.exitCode === 0 && r.stdout.trim() === 'x', `scoped env leaked: ${r.stdout}`)
  })

  await step('port 8080 is named', async () => {
    const res = await fetch(`https://${sbx.getHost(8080)}`)
    const body = await res.json()
    check(res.status === 403 && body.message.includes('port 8080'), `8080: ${res.status} ${JSON.stringify(body)}`)
  })

  await step('private traffic', async () => {
    const priv = await Sandbox.create({ network: { allowPublicTraffic: false }, timeoutMs: 120_000 })
    sandboxes.push(priv)
    await priv.commands.run('python3 -m http.server 8001', { background: true, cwd: '/home/user' })
    const url = `https://${priv.getHost(8001)}`
    let res = await fetchUntil(url, { headers: { 'e2b-traffic-access-token': priv.trafficAccessToken } }, 200)
    check(res.status === 200, `with the token: ${res.status}`)
    res = await fetch(url)
    const body = await res.json()
    check(res.status === 403 && body.sandboxId === priv.sandboxId && body.message.includes('is missing'), `without: ${res.status} ${JSON.stringify(body)}`)
  })

  await step('a killed sandbox', async () => {
    const gone = await Sandbox.create({ timeoutMs: 60_000 })
    const url = `https://${gone.getHost(3000)}`
    await gone.kill()
    const res = await fetch(url)
    const body = await res.json()
    check(res.status === 502 && body.message === 'The sandbox was not found' && body.sandboxId === gone.sandboxId && body.code === 502,
      `${res.status} ${JSON.stringify(body)}`)
  })
} finally {
  for (const s of sandboxes) await s.kill().catch(() => {})
}
process.exit(failed ? 1 : 0)
