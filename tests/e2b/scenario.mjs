// The E2B compatibility scenario: the official, unmodified E2B JavaScript
// SDKs (e2b, @e2b/code-interpreter, pinned in package-lock.json) against
// Rayito's E2B server, configured only as an E2B user would: E2B_API_KEY,
// E2B_API_URL and E2B_SANDBOX_URL (or E2B_DEBUG=true and E2B_SANDBOX_URL).
// tests/e2b_test.go runs it; it can also be run by hand:
//
//	npm ci --ignore-scripts && E2B_API_KEY=... E2B_API_URL=http://127.0.0.1:3000 \
//	  E2B_SANDBOX_URL=http://127.0.0.1:3000 node scenario.mjs [flags]
//
// Flags:
//
//	--debug             debug mode (E2B_DEBUG=true): the SDK makes no
//	                    control-plane calls and talks to the one sandbox
//	                    the server serves as debug_sandbox_id
//	--peer ADDR         an address sandboxes can reach when egress is open
//	                    (the test's peer network); enables the network steps
//	--peer-other ADDR   a second one, outside the allowlist step's allowOut
//	--only NAME,...     run only the steps whose name starts with one of these
//	--rules HOST        run only the network rules (E2B Secrets) steps
//	                    against HOST, an HTTPS upstream that wants the key
//	                    in E2B_RULES_KEY as x-api-key (the secrets test's)
//	--git URL           run only the git steps: clone URL (a private
//	                    repository: user "bot", token in E2B_GIT_TOKEN),
//	                    commit and push a branch with the SDK's sandbox.git
//
// Each step is named; a failing step prints FAIL <step>: <why> and the run
// goes on with the steps that do not depend on it; the exit status is 1 if
// any step failed. A step that cannot run here (a package the sandbox
// lacks) prints SKIP <step>: <why>.

import diagnostics from 'node:diagnostics_channel'
import { Sandbox as CodeInterpreter } from '@e2b/code-interpreter'
import {
  ALL_TRAFFIC,
  CommandExitError,
  FileNotFoundError,
  FileType,
  FilesystemEventType,
  InvalidArgumentError,
  NotFoundError,
  Sandbox,
  SandboxNotFoundError,
} from 'e2b'

// ---- transport errors -------------------------------------------------------

// The SDKs turn a dropped connection into "[unknown] terminated" and drop
// the cause; undici's diagnostics channel still says what happened on the
// socket (who closed it, how many bytes went each way). A failing step
// prints what was seen since the step began.
const transportErrors = []
diagnostics.subscribe('undici:request:error', ({ request, error }) => {
  const sock = error?.socket ?? error?.cause?.socket
  transportErrors.push(`${new Date().toISOString()} ${request?.method ?? ''} ${request?.path?.split('?')[0] ?? ''}: ${error?.code ?? ''} ${error?.message ?? error}` +
    (error?.cause ? ` (cause: ${error.cause.code ?? ''} ${error.cause.message ?? error.cause})` : '') +
    (sock ? ` socket ${JSON.stringify(sock)}` : ''))
})

// ---- arguments ------------------------------------------------------------

const args = process.argv.slice(2)
const flag = (name) => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : undefined
}
const debugMode = args.includes('--debug')
const peer = flag('--peer')
const peerOther = flag('--peer-other')
const rulesHost = flag('--rules')
const rulesKey = process.env.E2B_RULES_KEY
const gitURL = flag('--git')
const gitToken = process.env.E2B_GIT_TOKEN
const onlyList = flag('--only')?.split(',').filter(Boolean)
const only = onlyList?.length ? onlyList : undefined

// A tag of this run, so list filters see only this run's sandboxes.
const run = `scn-${process.pid}-${Date.now().toString(36)}`

// ---- the step runner ------------------------------------------------------

const failed = []
const skipped = []
let passed = 0
const STEP_TIMEOUT_MS = 120_000

class Skip extends Error {}

// step runs fn as the named step. needs names earlier steps it depends on:
// when one of them failed, this one fails at once saying so.
async function step(name, fn, { needs = [], timeoutMs = STEP_TIMEOUT_MS } = {}) {
  if (only && !only.some((p) => name.startsWith(p))) return
  const missing = needs.filter((n) => failed.includes(n))
  if (missing.length) {
    failed.push(name)
    console.log(`FAIL ${name}: not run: it needs ${missing.join(', ')}, which failed`)
    return
  }
  const started = Date.now()
  const errorsBefore = transportErrors.length
  let timer
  try {
    await Promise.race([
      fn(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs / 1000} s`)), timeoutMs)
      }),
    ])
    passed++
    console.log(`ok   ${name} (${Date.now() - started} ms)`)
  } catch (e) {
    if (e instanceof Skip) {
      skipped.push(name)
      console.log(`SKIP ${name}: ${e.message}`)
      return
    }
    failed.push(name)
    console.log(`FAIL ${name}: ${describe(e)}`)
    for (const t of transportErrors.slice(errorsBefore)) console.log(`  transport: ${t}`)
  } finally {
    clearTimeout(timer)
  }
}

function describe(e) {
  if (!(e instanceof Error)) return String(e)
  const kind = e.constructor?.name && e.constructor.name !== 'Error' ? `${e.constructor.name}: ` : ''
  const stack = (e.stack ?? '').split('\n').slice(1, 6).join('\n')
  const cause = e.cause ? `\n  cause: ${e.cause instanceof Error ? `${e.cause.message}${e.cause.cause ? ` (${e.cause.cause.message ?? e.cause.cause})` : ''}` : e.cause}` : ''
  return `${kind}${e.message}${cause}\n${stack}`
}

function check(cond, what) {
  if (!cond) throw new Error(what)
}

// canon is JSON with object keys sorted: eq compares values, not key order.
function canon(v) {
  return JSON.stringify(v, (_, x) =>
    x && typeof x === 'object' && !Array.isArray(x) && !(x instanceof Date)
      ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, x[k]]))
      : x)
}

function eq(got, want, what) {
  const g = canon(got)
  const w = canon(want)
  if (g !== w) throw new Error(`${what}: got ${g}, want ${w}`)
}

// rejects asserts that p rejects with an instance of cls and returns the
// error.
async function rejects(p, cls, what) {
  try {
    await p
  } catch (e) {
    if (!(e instanceof cls)) throw new Error(`${what}: want ${cls.name}, got ${describe(e)}`)
    return e
  }
  throw new Error(`${what}: want ${cls.name}, it succeeded`)
}

// waitFor polls cond (sync or async) until it holds.
async function waitFor(cond, what, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await cond()) return
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`)
    await sleep(50)
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const enc = new TextEncoder()
const sh = (s) => `'${s.replaceAll("'", `'\\''`)}'`

// Every sandbox the scenario creates; the end kills what is left.
const created = []
async function track(p) {
  const s = await p
  created.push(s)
  return s
}

// ---- the scenario: shared parts --------------------------------------------

// commandSteps: commands.run with streaming, exit codes, background and
// kill, stdin, connect, list.
async function commandSteps(sbx, prefix, needs) {
  await step(`${prefix}commands: run with stdout/stderr streaming`, async () => {
    const out = []
    const err = []
    const r = await sbx.commands.run('echo out1; echo err1 >&2; sleep 0.2; echo out2', {
      onStdout: (d) => out.push(d),
      onStderr: (d) => err.push(d),
    })
    eq(r.exitCode, 0, 'exitCode')
    eq(r.stdout, 'out1\nout2\n', 'result stdout')
    eq(r.stderr, 'err1\n', 'result stderr')
    eq(out.join(''), 'out1\nout2\n', 'onStdout chunks')
    eq(err.join(''), 'err1\n', 'onStderr chunks')
    check(out.length >= 2, `stdout arrived in one chunk (${JSON.stringify(out)}): not streamed`)
    const who = await sbx.commands.run('id -un; echo "$HOME"; pwd')
    eq(who.stdout, 'user\n/home/user\n/home/user\n', "E2B's default user, HOME and workdir")
    const envs = await sbx.commands.run('echo "$PER_CALL"', { envs: { PER_CALL: 'per call' } })
    eq(envs.stdout, 'per call\n', 'run envs')
    const cwd = await sbx.commands.run('pwd', { cwd: '/tmp' })
    eq(cwd.stdout, '/tmp\n', 'run cwd')
  }, { needs })

  await step(`${prefix}commands: exit codes and CommandExitError`, async () => {
    const e = await rejects(sbx.commands.run('echo partial; echo oops >&2; exit 3'), CommandExitError, 'exit 3')
    eq(e.exitCode, 3, 'CommandExitError.exitCode')
    eq(e.stdout, 'partial\n', 'CommandExitError.stdout')
    eq(e.stderr, 'oops\n', 'CommandExitError.stderr')
    const h = await sbx.commands.run('exit 5', { background: true })
    const e2 = await rejects(h.wait(), CommandExitError, 'background exit 5')
    eq(e2.exitCode, 5, 'background exitCode')
    eq(h.exitCode, 5, 'handle.exitCode')
    await rejects(sbx.commands.run('true', { cwd: '/no/such/dir' }), InvalidArgumentError, 'a missing cwd')
  }, { needs })

  await step(`${prefix}commands: background, list and kill`, async () => {
    const marker = `bgsleep-${run}`
    const h = await sbx.commands.run(`exec -a ${marker} sleep 600`, { background: true })
    check(Number.isInteger(h.pid) && h.pid > 0, `pid ${h.pid}`)
    eq(h.exitCode, undefined, 'exitCode while running')
    const h2 = await sbx.commands.run('sleep 600', { background: true })
    const procs = await sbx.commands.list()
    const mine = procs.find((p) => p.pid === h.pid)
    check(mine, `commands.list() lacks pid ${h.pid}: ${JSON.stringify(procs)}`)
    check(procs.some((p) => p.pid === h2.pid), `commands.list() lacks pid ${h2.pid}`)
    eq(mine.cmd, '/bin/bash', 'listed cmd')
    check(mine.args.join(' ').includes(marker), `listed args ${JSON.stringify(mine.args)}`)
    eq(await h.kill(), true, 'handle.kill()')
    const e = await rejects(h.wait(), CommandExitError, 'wait after kill')
    check(e.exitCode !== 0, `a killed command's exitCode ${e.exitCode}`)
    eq(await sbx.commands.kill(h2.pid), true, 'commands.kill(pid)')
    await rejects(h2.wait(), CommandExitError, 'wait after commands.kill')
    await waitFor(async () => !(await sbx.commands.list()).some((p) => p.pid === h.pid || p.pid === h2.pid),
      'killed commands leave commands.list()', 5_000)
    eq(await sbx.commands.kill(h.pid), false, 'kill of a finished pid')
    // [b]: the pattern does not match pgrep's own shell's command line.
    const ps = await sbx.commands.run(`pgrep -f '[${marker[0]}]${marker.slice(1)}' || true`)
    eq(ps.stdout, '', 'the killed process is gone from the sandbox')
  }, { needs })

  await step(`${prefix}commands: stdin (sendStdin, closeStdin)`, async () => {
    const seen = []
    const h = await sbx.commands.run('cat; echo "[eof]"', { background: true, stdin: true, onStdout: (d) => seen.push(d) })
    await h.sendStdin('line one\n')
    await waitFor(() => seen.join('').includes('line one\n'), 'stdin echoed back by cat')
    await sbx.commands.sendStdin(h.pid, enc.encode('line two\n'))
    await h.closeStdin()
    const r = await h.wait()
    eq(r.stdout, 'line one\nline two\n[eof]\n', 'stdout after closeStdin')
    const noStdin = await sbx.commands.run('sleep 30', { background: true })
    await rejects(noStdin.sendStdin('x'), Error, 'sendStdin to a command started without stdin')
    await noStdin.kill()
  }, { needs })

  await step(`${prefix}commands: connect to a running pid`, async () => {
    const h = await sbx.commands.run('for i in $(seq 1 15); do echo tick $i; sleep 0.2; done; exit 4', { background: true })
    await h.disconnect()
    const seen = []
    const c = await sbx.commands.connect(h.pid, { onStdout: (d) => seen.push(d) })
    eq(c.pid, h.pid, 'connected pid')
    const e = await rejects(c.wait(), CommandExitError, 'the connected command exits 4')
    eq(e.exitCode, 4, 'exit code through connect')
    check(seen.join('').includes('tick 15\n'), `output through connect: ${JSON.stringify(seen.join(''))}`)
    await rejects(sbx.commands.connect(999_999), NotFoundError, 'connect to an unknown pid')
    // As envd, connect replays nothing: only what comes after it.
    const b = await sbx.commands.run('echo before; sleep 1; echo after', { background: true })
    await sleep(500)
    const c2 = await sbx.commands.connect(b.pid)
    eq((await c2.wait()).stdout, 'after\n', 'output through a connect after the first line')
    await b.kill().catch(() => {})
  }, { needs })
}

// fileSteps: write single and multi, read text/bytes/stream, list with
// depth, makeDir, exists, rename, remove, a missing file, watchDir.
async function fileSteps(sbx, prefix, needs) {
  const dir = `/home/user/scn-${run}`
  const bytes = Uint8Array.from({ length: 256 }, (_, i) => i)
  const w = `${prefix}files: write single`
  await step(w, async () => {
    const info = await sbx.files.write(`${dir}/a.txt`, 'alpha\n')
    eq([info.name, info.path], ['a.txt', `${dir}/a.txt`], 'WriteInfo name, path')
    const cat = await sbx.commands.run(`cat ${dir}/a.txt; stat -c '%U %a' ${dir}/a.txt`)
    eq(cat.stdout, 'alpha\nuser 644\n', 'the file as the sandbox sees it (content, owner, mode)')
    const rel = await sbx.files.write('rel.txt', 'relative')
    eq(rel.path, '/home/user/rel.txt', 'a relative path resolves against the home directory')
  }, { needs })

  await step(`${prefix}files: write gzip, octet-stream and streamed uploads, file metadata`, async () => {
    const big = 'y'.repeat(4 << 20)
    await sbx.files.write(`${dir}/gz.txt`, big, { gzip: true })
    await sbx.files.write(`${dir}/octet.txt`, 'octet', { useOctetStream: true })
    const chunks = ['streamed ', 'in ', 'chunks']
    const body = new ReadableStream({
      pull(c) {
        const next = chunks.shift()
        if (next === undefined) c.close()
        else c.enqueue(enc.encode(next))
      },
    })
    await sbx.files.write(`${dir}/stream.txt`, body)
    const r = await sbx.commands.run(`wc -c < ${dir}/gz.txt; cat ${dir}/octet.txt; echo; cat ${dir}/stream.txt`)
    eq(r.stdout, `${big.length}\noctet\nstreamed in chunks`, 'the uploaded files as the sandbox sees them')
    const w = await sbx.files.write(`${dir}/meta.txt`, 'm', { metadata: { origin: 'scenario' } })
    eq(w.metadata, { origin: 'scenario' }, 'WriteInfo.metadata')
    eq((await sbx.files.getInfo(`${dir}/meta.txt`)).metadata, { origin: 'scenario' }, 'getInfo metadata of an uploaded file')
  }, { needs: [...needs, w] })

  const wm = `${prefix}files: writeFiles multi`
  await step(wm, async () => {
    const infos = await sbx.files.writeFiles([
      { path: `${dir}/b.txt`, data: 'beta' },
      { path: `${dir}/sub/c.bin`, data: bytes.buffer },
      { path: `${dir}/sub/deeper/d.txt`, data: new Blob(['delta']) },
    ])
    eq(infos.map((i) => i.path), [`${dir}/b.txt`, `${dir}/sub/c.bin`, `${dir}/sub/deeper/d.txt`], 'written paths')
    const both = await sbx.files.write([{ path: `${dir}/e.txt`, data: 'epsilon' }])
    eq(both.length, 1, 'write([entry]) result length')
    const sum = await sbx.commands.run(`cat ${dir}/b.txt; echo; cat ${dir}/sub/deeper/d.txt; echo; wc -c < ${dir}/sub/c.bin`)
    eq(sum.stdout, 'beta\ndelta\n256\n', 'multi-written files as the sandbox sees them')
  }, { needs: [...needs, w] })

  await step(`${prefix}files: read text, bytes, blob, stream`, async () => {
    eq(await sbx.files.read(`${dir}/a.txt`), 'alpha\n', 'read text')
    const b = await sbx.files.read(`${dir}/sub/c.bin`, { format: 'bytes' })
    check(b instanceof Uint8Array, 'bytes format is a Uint8Array')
    eq(Array.from(b), Array.from(bytes), 'read bytes')
    const blob = await sbx.files.read(`${dir}/b.txt`, { format: 'blob' })
    eq(await blob.text(), 'beta', 'read blob')
    const big = 'x'.repeat(3 << 20)
    await sbx.files.write(`${dir}/big.txt`, big)
    const stream = await sbx.files.read(`${dir}/big.txt`, { format: 'stream' })
    let n = 0
    for await (const chunk of stream) n += chunk.length
    eq(n, big.length, 'bytes read through the stream')
    await sbx.commands.run(`: > ${dir}/empty`)
    eq(await sbx.files.read(`${dir}/empty`), '', 'an empty file')
    const gz = await sbx.files.read(`${dir}/big.txt`, { gzip: true })
    eq(gz.length, big.length, 'a gzip read')
  }, { needs: [...needs, wm] })

  await step(`${prefix}files: list with depth`, async () => {
    const one = await sbx.files.list(dir)
    const names = one.map((e) => e.name).sort()
    check(['a.txt', 'b.txt', 'sub'].every((n) => names.includes(n)), `list depth 1: ${names}`)
    check(!names.includes('c.bin'), `list depth 1 went deeper: ${names}`)
    const sub = one.find((e) => e.name === 'sub')
    eq(sub.type, FileType.DIR, 'a directory entry type')
    eq(sub.path, `${dir}/sub`, 'a directory entry path')
    const a = one.find((e) => e.name === 'a.txt')
    eq([a.type, a.size, a.owner], [FileType.FILE, 6, 'user'], 'a file entry type, size, owner')
    check(a.modifiedTime instanceof Date && Math.abs(a.modifiedTime - Date.now()) < 600_000, `modifiedTime ${a.modifiedTime}`)
    const two = (await sbx.files.list(dir, { depth: 2 })).map((e) => e.path)
    check(two.includes(`${dir}/sub/c.bin`), `list depth 2 lacks sub/c.bin: ${two}`)
    check(!two.includes(`${dir}/sub/deeper/d.txt`), `list depth 2 went to depth 3: ${two}`)
    const three = (await sbx.files.list(dir, { depth: 3 })).map((e) => e.path)
    check(three.includes(`${dir}/sub/deeper/d.txt`), `list depth 3 lacks sub/deeper/d.txt: ${three}`)
    const info = await sbx.files.getInfo(`${dir}/sub/c.bin`)
    eq([info.name, info.type, info.size], ['c.bin', FileType.FILE, 256], 'files.getInfo')
  }, { needs: [...needs, wm] })

  await step(`${prefix}files: entries, paths, parents and remove as envd's`, async () => {
    await sbx.commands.run(`ln -s ${dir}/a.txt ${dir}/link.txt && python3 -c "import os; os.setxattr('${dir}/a.txt', 'user.e2b.author', b'mish')"`)
    const a = await sbx.files.getInfo(`${dir}/a.txt`)
    eq([a.mode, a.permissions, a.metadata], [0o644, '-rw-r--r--', { author: 'mish' }], 'a file: mode (the permission bits), permissions, user.e2b.* metadata')
    const l = await sbx.files.getInfo(`${dir}/link.txt`)
    eq([l.type, l.symlinkTarget, l.metadata], [FileType.FILE, `${dir}/a.txt`, { author: 'mish' }], "a link: its target's type and metadata, its resolved target")
    eq((await sbx.files.list(dir)).find((e) => e.name === 'sub').mode, 0o755, "a directory entry's mode")
    await sbx.files.remove(`${dir}/never-there`)
    eq((await sbx.files.getInfo('~')).path, '/home/user', '~ is the home')
    eq((await sbx.files.getInfo(`${dir}/sub/../a.txt`)).path, `${dir}/a.txt`, '.. is cleaned')
    const top = `/scn-${run}`
    const infos = await sbx.files.write([{ path: `${top}/x.txt`, data: 'x' }, { path: `${top}/y/z.txt`, data: 'z' }])
    eq(infos.map((i) => i.path), [`${top}/x.txt`, `${top}/y/z.txt`], 'a multi-file write under a new directory of /')
    const own = await sbx.commands.run(`stat -c '%U %a' ${top} ${top}/y ${top}/x.txt`)
    eq(own.stdout, 'user 755\nuser 755\nuser 644\n', "the new directories are the user's, as envd makes them")
    await sbx.files.remove(top)
    await sbx.files.remove(`${dir}/link.txt`)
    // A rename to another file system (/tmp and the home are separate
    // tmpfs in a local sandbox, one file system on E2B) moves the file.
    await sbx.files.write(`${dir}/mv.txt`, 'moved')
    const mv = await sbx.files.rename(`${dir}/mv.txt`, `/tmp/${run}-mv.txt`)
    eq([mv.path, await sbx.files.read(`/tmp/${run}-mv.txt`), await sbx.files.exists(`${dir}/mv.txt`)], [`/tmp/${run}-mv.txt`, 'moved', false], 'a rename from the home to /tmp')
    await sbx.files.remove(`/tmp/${run}-mv.txt`)
  }, { needs: [...needs, wm] })

  await step(`${prefix}files: makeDir, exists`, async () => {
    eq(await sbx.files.makeDir(`${dir}/made/deep`), true, 'makeDir of a new path')
    eq(await sbx.files.makeDir(`${dir}/made/deep`), false, 'makeDir of an existing directory')
    eq(await sbx.files.exists(`${dir}/made/deep`), true, 'exists(directory)')
    eq(await sbx.files.exists(`${dir}/a.txt`), true, 'exists(file)')
    eq(await sbx.files.exists(`${dir}/nope`), false, 'exists(missing)')
  }, { needs: [...needs, w] })

  await step(`${prefix}files: rename, remove`, async () => {
    const e = await sbx.files.rename(`${dir}/b.txt`, `${dir}/b2.txt`)
    eq([e.name, e.path], ['b2.txt', `${dir}/b2.txt`], 'rename result')
    eq(await sbx.files.exists(`${dir}/b.txt`), false, 'the old name after rename')
    eq(await sbx.files.read(`${dir}/b2.txt`), 'beta', 'the new name after rename')
    await sbx.files.remove(`${dir}/b2.txt`)
    eq(await sbx.files.exists(`${dir}/b2.txt`), false, 'a removed file')
    await sbx.files.remove(`${dir}/sub`)
    eq(await sbx.files.exists(`${dir}/sub/c.bin`), false, 'a removed directory tree')
  }, { needs: [...needs, wm] })

  await step(`${prefix}files: a missing file is NotFoundError`, async () => {
    const e = await rejects(sbx.files.read(`${dir}/missing.txt`), NotFoundError, 'read of a missing file')
    check(e instanceof FileNotFoundError, `want FileNotFoundError, got ${e.constructor.name}`)
    await rejects(sbx.files.getInfo(`${dir}/missing.txt`), NotFoundError, 'getInfo of a missing file')
    await rejects(sbx.files.list(`${dir}/missing-dir`), NotFoundError, 'list of a missing directory')
    await rejects(sbx.files.rename(`${dir}/missing.txt`, `${dir}/x`), NotFoundError, 'rename of a missing file')
  }, { needs })

  await step(`${prefix}files: watchDir events`, async () => {
    const wdir = `${dir}/watched`
    await sbx.files.makeDir(wdir)
    await sbx.files.makeDir(`${wdir}/inner`)
    const events = []
    // Each action, then the events envd gives for it (among the events
    // since the action); every miss is listed at the end.
    const missing = []
    let mark = 0
    const act = async (p) => {
      mark = events.length
      await p()
    }
    const expect = async (what, wants) => {
      const has = (type, name) => events.slice(mark).some((e) => e.type === type && e.name === name)
      try {
        await waitFor(() => wants.every(([type, name]) => has(type, name)), what, 5_000)
      } catch {
        missing.push(`${what}: want ${wants.map(([t, n]) => `${t} ${n}`).join(', ')}, got ${JSON.stringify(events.slice(mark))}`)
      }
    }
    const handle = await sbx.files.watchDir(wdir, (ev) => events.push(ev))
    try {
      await act(() => sbx.files.write(`${wdir}/w.txt`, 'watched'))
      await expect('an upload of a new file', [[FilesystemEventType.CREATE, 'w.txt'], [FilesystemEventType.WRITE, 'w.txt']])
      await act(() => sbx.files.write(`${wdir}/w.txt`, 'rewritten'))
      await expect('an upload over an existing file', [[FilesystemEventType.WRITE, 'w.txt']])
      await act(() => sbx.files.rename(`${wdir}/w.txt`, `${wdir}/w2.txt`))
      await expect('a rename', [[FilesystemEventType.RENAME, 'w.txt'], [FilesystemEventType.CREATE, 'w2.txt']])
      await act(() => sbx.commands.run(`echo more >> ${wdir}/w2.txt; chmod 600 ${wdir}/w2.txt`))
      await expect('an append and a chmod in a command', [[FilesystemEventType.WRITE, 'w2.txt'], [FilesystemEventType.CHMOD, 'w2.txt']])
      await act(() => sbx.commands.run(`rm ${wdir}/w2.txt`))
      await expect('a remove', [[FilesystemEventType.REMOVE, 'w2.txt']])
      await sbx.files.write(`${wdir}/inner/deep.txt`, 'x')
      await sleep(300)
      if (events.some((e) => e.name.includes('deep.txt'))) missing.push('a non-recursive watch saw a file in a subdirectory')
    } finally {
      await handle.stop()
    }
    const n = events.length
    await sbx.files.write(`${wdir}/after.txt`, 'x')
    await sleep(300)
    if (events.length !== n) missing.push(`${events.length - n} events after stop()`)
    await rejects(sbx.files.watchDir(`${dir}/missing-dir`, () => {}), NotFoundError, 'watchDir of a missing directory')
      .catch((e) => missing.push(e.message))
    if (missing.length) throw new Error(`${missing.join('; ')} (events: ${JSON.stringify(events)})`)
  }, { needs })
}

// ptySteps: create with a size, input, resize, output, kill.
async function ptySteps(sbx, prefix, needs) {
  await step(`${prefix}pty: create, sendInput, resize, kill`, async () => {
    const dec = new TextDecoder()
    let screen = ''
    const t = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { screen += dec.decode(d, { stream: true }) } })
    check(t.pid > 0, `pty pid ${t.pid}`)
    await sbx.pty.sendInput(t.pid, enc.encode('stty size; echo "term=$TERM"\n'))
    await waitFor(() => screen.includes('24 80') && screen.includes('term=xterm-256color'), `the PTY's size and TERM (screen ${JSON.stringify(screen)})`)
    await sbx.pty.resize(t.pid, { cols: 100, rows: 30 })
    await sbx.pty.sendInput(t.pid, enc.encode('stty size\n'))
    await waitFor(() => screen.includes('30 100'), `the size after resize (screen ${JSON.stringify(screen.slice(-300))})`)
    await sbx.pty.sendInput(t.pid, enc.encode('echo $((6*7))-marker\n'))
    await waitFor(() => screen.includes('42-marker'), 'output of a command typed into the PTY')
    check((await sbx.commands.list()).some((p) => p.pid === t.pid), 'commands.list() shows the PTY')
    eq(await sbx.pty.kill(t.pid), true, 'pty.kill')
    await rejects(t.wait(), CommandExitError, 'wait after the PTY was killed')
    eq(await sbx.pty.kill(t.pid), false, 'a second pty.kill')
  }, { needs })
}

// codeSteps: runCode (result text, stdout, error, PNG) and contexts.
async function codeSteps(ci, prefix, needs) {
  const haveKernel = `${prefix}code: the sandbox has a Python kernel`
  await step(haveKernel, async () => {
    const r = await ci.commands.run("python3 -c 'import ipykernel' 2>&1 || echo missing")
    if (r.stdout.includes('missing')) {
      throw new Skip('python3 in the sandbox lacks ipykernel (make deps installs python3-ipykernel); the code steps skip')
    }
  }, { needs })
  if (skipped.includes(haveKernel)) return
  needs = [...needs, haveKernel]

  await step(`${prefix}code: runCode result text`, async () => {
    const ex = await ci.runCode('1+1')
    eq(ex.error, undefined, 'error')
    eq(ex.text, '2', 'execution.text')
    check(ex.results.some((r) => r.isMainResult && r.text === '2'), `results ${JSON.stringify(ex.results)}`)
  }, { needs })

  await step(`${prefix}code: runCode stdout and stderr`, async () => {
    const out = []
    const ex = await ci.runCode('import sys\nprint("hello from python")\nprint("to stderr", file=sys.stderr)', {
      onStdout: (m) => out.push(m.line),
    })
    eq(ex.logs.stdout.join(''), 'hello from python\n', 'logs.stdout')
    eq(ex.logs.stderr.join(''), 'to stderr\n', 'logs.stderr')
    eq(out.join(''), 'hello from python\n', 'onStdout')
    eq(ex.error, undefined, 'error')
  }, { needs })

  await step(`${prefix}code: runCode error`, async () => {
    const errs = []
    const ex = await ci.runCode('def f():\n    raise ValueError("bad value")\nf()', { onError: (e) => errs.push(e) })
    check(ex.error, 'no execution.error')
    eq([ex.error.name, ex.error.value], ['ValueError', 'bad value'], 'error name, value')
    check(ex.error.traceback.includes('ValueError') && ex.error.traceback.includes('f()'), `traceback ${JSON.stringify(ex.error.traceback)}`)
    eq(errs.length, 1, 'onError calls')
  }, { needs })

  await step(`${prefix}code: runCode PNG (matplotlib)`, async () => {
    const r = await ci.commands.run("python3 -c 'import matplotlib' 2>&1 || echo missing")
    if (r.stdout.includes('missing')) {
      throw new Skip('python3 in the sandbox lacks matplotlib (make deps installs python3-matplotlib)')
    }
    const ex = await ci.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()')
    eq(ex.error, undefined, 'error')
    const png = ex.results.find((x) => x.png)
    check(png, `no PNG result: ${JSON.stringify(ex.results.map((x) => x.formats()))}`)
    check(Buffer.from(png.png, 'base64').subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
      'the PNG result is not a PNG')
  }, { needs, timeoutMs: 180_000 })

  await step(`${prefix}code: contexts`, async () => {
    const ctx = await ci.createCodeContext({ cwd: '/tmp' })
    check(ctx.id, `context ${JSON.stringify(ctx)}`)
    eq(ctx.cwd, '/tmp', 'context cwd')
    await ci.runCode('kept_in_context = 41', { context: ctx })
    eq((await ci.runCode('kept_in_context + 1', { context: ctx })).text, '42', 'state kept in the context')
    eq((await ci.runCode('import os; os.getcwd()', { context: ctx })).text, '/tmp', 'the context cwd (a string result without its quotes, as on E2B)')
    const other = await ci.runCode('kept_in_context', {})
    eq(other.error?.name, 'NameError', 'the default context does not see the other context')
    const listed = await ci.listCodeContexts()
    check(listed.some((c) => c.id === ctx.id), `listCodeContexts lacks ${ctx.id}: ${JSON.stringify(listed)}`)
    await ci.removeCodeContext(ctx)
    const after = await ci.listCodeContexts()
    check(!after.some((c) => c.id === ctx.id), `listCodeContexts still has the removed ${ctx.id}`)
  }, { needs, timeoutMs: 180_000 })
}

// ---- the full scenario (control plane + data plane) ------------------------

async function full() {
  let sbx
  let sbx2
  const meta = { suite: run, role: 'main' }
  await step('create (metadata, envs, timeout)', async () => {
    const before = Date.now()
    sbx = await track(Sandbox.create({ metadata: meta, envs: { SCENARIO_VAR: 'hello env', OTHER: 'x y' }, timeoutMs: 120_000 }))
    check(sbx.sandboxId, 'no sandboxId')
    const r = await sbx.commands.run('echo "$SCENARIO_VAR|$OTHER"')
    eq(r.stdout, 'hello env|x y\n', 'create-time envs in a command')
    const over = await sbx.commands.run('echo "$SCENARIO_VAR"', { envs: { SCENARIO_VAR: 'overridden' } })
    eq(over.stdout, 'overridden\n', 'per-command envs override create-time envs')
    const info = await sbx.getInfo()
    eq(info.metadata, meta, 'metadata')
    const left = info.endAt.getTime() - before
    check(left > 100_000 && left < 140_000, `endAt is ${Math.round(left / 1000)} s after create, want about 120 s (timeoutMs)`)
    eq(await sbx.isRunning(), true, 'isRunning')
  })
  const c = ['create (metadata, envs, timeout)']

  await commandSteps(sbx, '', c)
  await fileSteps(sbx, '', c)
  await forkSnapshotSteps(sbx, meta, c)

  await step('getInfo (metadata, state)', async () => {
    const info = await Sandbox.getInfo(sbx.sandboxId)
    eq(info.sandboxId, sbx.sandboxId, 'sandboxId')
    eq(info.metadata, meta, 'metadata')
    eq(info.state, 'running', 'state')
    check(info.templateId, 'no templateId')
    check(info.startedAt instanceof Date && !isNaN(info.startedAt), `startedAt ${info.startedAt}`)
    check(info.startedAt <= new Date() && info.endAt > new Date(), `startedAt ${info.startedAt} endAt ${info.endAt}`)
    check(info.cpuCount > 0 && info.memoryMB > 0, `cpuCount ${info.cpuCount} memoryMB ${info.memoryMB}`)
    check(/^\d+\.\d+\.\d+/.test(info.envdVersion), `envdVersion ${info.envdVersion}`)
    await rejects(Sandbox.getInfo('no-such-sandbox-id'), SandboxNotFoundError, 'getInfo of an unknown id')
  }, { needs: c })

  await step("the data plane needs the sandbox's access token", async () => {
    const url = process.env.E2B_SANDBOX_URL
    const token = sbx.envdAccessToken
    check(token, 'create returned no envdAccessToken (E2B\'s secure default)')
    const stat = (headers) => fetch(`${url}/filesystem.Filesystem/Stat`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1', 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983', ...headers },
      body: JSON.stringify({ path: '/home/user' }),
    })
    eq((await stat({ 'X-Access-Token': token })).status, 200, 'Stat with the token')
    eq((await stat({})).status, 401, 'Stat without a token')
    eq((await stat({ 'X-Access-Token': token.slice(0, -2) + 'xx' })).status, 401, 'Stat with a wrong token')
  }, { needs: c })

  await step('getMetrics', async () => {
    let m = []
    await waitFor(async () => (m = await sbx.getMetrics()).length > 0, 'a metrics sample', 20_000)
    const last = m[m.length - 1]
    check(last.timestamp instanceof Date && !isNaN(last.timestamp), `timestamp ${last.timestamp}`)
    check(last.cpuCount > 0 && last.memTotal > 0 && last.memUsed > 0, `metrics ${JSON.stringify(last)}`)
    await rejects(Sandbox.getMetrics('no-such-sandbox-id'), SandboxNotFoundError, 'getMetrics of an unknown id')
  }, { needs: c, timeoutMs: 60_000 })

  await step('setTimeout', async () => {
    const before = Date.now()
    await sbx.setTimeout(200_000)
    const left = (await sbx.getInfo()).endAt.getTime() - before
    check(left > 180_000 && left < 220_000, `endAt is ${Math.round(left / 1000)} s after setTimeout(200 s)`)
    await Sandbox.setTimeout(sbx.sandboxId, 150_000)
    const left2 = (await sbx.getInfo()).endAt.getTime() - before
    check(left2 > 130_000 && left2 < 170_000, `endAt is ${Math.round(left2 / 1000)} s after a shorter setTimeout(150 s)`)
    await rejects(Sandbox.setTimeout('no-such-sandbox-id', 60_000), SandboxNotFoundError, 'setTimeout of an unknown id')
  }, { needs: c })

  await step('Sandbox.connect(id)', async () => {
    const again = await Sandbox.connect(sbx.sandboxId)
    eq(again.sandboxId, sbx.sandboxId, 'sandboxId')
    eq((await again.commands.run('echo connected')).stdout, 'connected\n', 'a command through the connected sandbox')
    eq(await again.files.exists('/home/user/rel.txt'), true, 'a file written through the first handle')
    await rejects(Sandbox.connect('no-such-sandbox-id'), SandboxNotFoundError, 'connect to an unknown id')
  }, { needs: c })

  const second = 'create a second sandbox'
  await step(second, async () => {
    sbx2 = await track(Sandbox.create({ metadata: { suite: run, role: 'second', label: 'two words & a=b' } }))
    const info = await sbx2.getInfo()
    const left = info.endAt - info.startedAt
    check(left > 280_000 && left < 320_000, `E2B's default timeout is 300 s, got ${Math.round(left / 1000)} s`)
  })

  await step('Sandbox.list with metadata filter and pagination', async () => {
    const p = Sandbox.list({ query: { metadata: { suite: run } }, limit: 1 })
    eq(p.hasNext, true, 'hasNext before the first page')
    const ids = []
    let pages = 0
    while (p.hasNext && pages < 5) {
      const items = await p.nextItems()
      pages++
      check(items.length <= 1, `a page of limit 1 has ${items.length} items`)
      for (const s of items) {
        ids.push(s.sandboxId)
        eq(s.metadata.suite, run, 'listed metadata')
        eq(s.state, 'running', 'listed state')
      }
      if (pages === 1) check(p.hasNext, 'hasNext after the first page of two sandboxes with limit 1')
    }
    eq(p.hasNext, false, `hasNext after ${pages} pages`)
    eq([...ids].sort(), [sbx.sandboxId, sbx2.sandboxId].sort(), 'the sandboxes over all pages')
    const byLabel = await Sandbox.list({ query: { metadata: { suite: run, label: 'two words & a=b' } } }).nextItems()
    eq(byLabel.map((s) => s.sandboxId), [sbx2.sandboxId], 'a metadata filter whose value needs encoding')
    const none = await Sandbox.list({ query: { metadata: { suite: run, role: 'nobody' } } }).nextItems()
    eq(none, [], 'a metadata filter nothing matches')
  }, { needs: [...c, second] })

  const pause = 'pause, then connect resumes with state kept'
  await step(pause, async () => {
    await sbx2.files.write('/home/user/kept.txt', 'kept across pause')
    const counter = await sbx2.commands.run('n=0; while :; do n=$((n+1)); echo $n > /home/user/counter; sleep 0.1; done',
      { background: true, timeoutMs: 0 })
    await waitFor(async () => Number(await sbx2.files.read('/home/user/counter').catch(() => '0')) > 2, 'the counter runs')
    eq(await sbx2.pause(), true, 'pause()')
    eq((await Sandbox.getInfo(sbx2.sandboxId)).state, 'paused', 'state after pause')
    eq(await Sandbox.pause(sbx2.sandboxId), false, 'pause of a paused sandbox')
    const paused = await Sandbox.list({ query: { metadata: { suite: run }, state: ['paused'] } }).nextItems()
    eq(paused.map((s) => s.sandboxId), [sbx2.sandboxId], 'list state=paused')
    const running = await Sandbox.list({ query: { metadata: { suite: run }, state: ['running'] } }).nextItems()
    eq(running.map((s) => s.sandboxId), [sbx.sandboxId], 'list state=running')
    const resumed = await Sandbox.connect(sbx2.sandboxId)
    eq((await Sandbox.getInfo(sbx2.sandboxId)).state, 'running', 'state after connect')
    eq(await resumed.files.read('/home/user/kept.txt'), 'kept across pause', 'a file across pause/resume')
    check((await resumed.commands.list()).some((p) => p.pid === counter.pid), 'the background process is listed after resume')
    const n1 = Number(await resumed.files.read('/home/user/counter'))
    await waitFor(async () => Number(await resumed.files.read('/home/user/counter')) > n1 + 2, 'the background process runs on after resume')
    await counter.kill()
  }, { needs: [...c, second] })

  await step('kill (then isRunning false, getInfo not found)', async () => {
    eq(await sbx2.kill(), true, 'kill()')
    eq(await sbx2.isRunning(), false, 'isRunning after kill')
    await rejects(Sandbox.getInfo(sbx2.sandboxId), SandboxNotFoundError, 'getInfo after kill')
    eq(await Sandbox.kill(sbx2.sandboxId), false, 'Sandbox.kill of a killed sandbox')
    await rejects(Sandbox.connect(sbx2.sandboxId), SandboxNotFoundError, 'connect to a killed sandbox')
    const listed = await Sandbox.list({ query: { metadata: { suite: run } } }).nextItems()
    eq(listed.map((s) => s.sandboxId), [sbx.sandboxId], 'list after kill')
  }, { needs: [...c, second] })

  await ptySteps(sbx, '', c)

  await networkSteps(sbx, c)

  let ci
  const ciCreate = 'code: create a code-interpreter sandbox'
  await step(ciCreate, async () => {
    ci = await track(CodeInterpreter.create({ metadata: { suite: run, role: 'code' } }))
  })
  if (!failed.includes(ciCreate)) await codeSteps(ci, '', [ciCreate])

  await step('kill the remaining sandboxes', async () => {
    for (const s of [sbx, ci]) {
      if (s) eq(await s.kill(), true, `kill ${s.sandboxId}`)
    }
    // Whatever an earlier failure left (kill answers false for the killed).
    for (const s of created) await s.kill()
    const listed = await Sandbox.list({ query: { metadata: { suite: run } } }).nextItems()
    eq(listed.map((s) => s.sandboxId), [], 'sandboxes of this run left')
  })
}

// forkSnapshotSteps: fork and snapshots, which Rayito's gateway makes as
// copies of /home/user (files only, never memory or processes). Full mode
// only: debug mode has no control plane. The sandboxes made here are
// killed by the last step, so that the listing steps after it see only
// the run's own.
async function forkSnapshotSteps(sbx, meta, needs) {
  const path = `/home/user/fork-${run}.txt`
  const onlyFork = `/home/user/only-fork-${run}.txt`
  const made = []
  const fork = 'fork: {count: 2} copies /home/user into each fork'
  await step(fork, async () => {
    await sbx.files.write(path, 'from the source\n')
    const forks = await sbx.fork({ count: 2 })
    eq(forks.length, 2, 'fork entries')
    for (const f of forks) {
      if (f instanceof Error) continue
      created.push(f)
      made.push(f)
    }
    for (const f of forks) {
      if (f instanceof Error) throw new Error(`a fork failed: ${describe(f)}`)
    }
    check(forks[0].sandboxId !== sbx.sandboxId && forks[1].sandboxId !== forks[0].sandboxId, 'forks have ids of their own')
    for (const [i, f] of forks.entries()) {
      eq(await f.files.read(path), 'from the source\n', `the file in fork ${i}`)
      const r = await f.commands.run(`stat -c %U ${path}; echo "$SCENARIO_VAR"`)
      eq(r.stdout, 'user\nhello env\n', `fork ${i}: the file's owner and the create-time envs`)
      eq((await f.getInfo()).metadata, meta, `fork ${i}: metadata`)
    }
    // Each fork is a sandbox of its own: its writes stay there.
    await forks[0].files.write(path, 'changed in fork 0\n')
    await forks[0].files.write(onlyFork, 'x')
    eq(await sbx.files.read(path), 'from the source\n', 'the source after a write in a fork')
    eq(await sbx.files.exists(onlyFork), false, 'a file made in a fork, in the source')
    eq(await forks[1].files.read(path), 'from the source\n', 'the other fork after a write in fork 0')
    eq(await sbx.isRunning(), true, 'the source runs on')
  }, { needs })

  const snapName = `scn-snap-${run}`
  await step('snapshots: createSnapshot, create from it, listSnapshots, deleteSnapshot', async () => {
    await sbx.files.write(path, 'in the snapshot\n')
    const snap = await sbx.createSnapshot({ name: snapName })
    check(snap.snapshotId, 'no snapshotId')
    eq(snap.names, [snapName], 'snapshot names')
    await sbx.files.write(path, 'after the snapshot\n')
    const restored = await track(Sandbox.create(snap.snapshotId, { metadata: { suite: run, role: 'restored' } }))
    made.push(restored)
    eq(await restored.files.read(path), 'in the snapshot\n', 'the file in a sandbox made from the snapshot')
    eq(await sbx.files.read(path), 'after the snapshot\n', 'the source after the snapshot')
    const listed = await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems()
    const mine = listed.filter((s) => s.snapshotId === snap.snapshotId)
    eq(mine, [{ snapshotId: snap.snapshotId, names: [snapName] }], 'listSnapshots({sandboxId})')
    eq(await Sandbox.deleteSnapshot(snap.snapshotId), true, 'deleteSnapshot')
    eq(await Sandbox.deleteSnapshot(snap.snapshotId), false, 'deleteSnapshot again')
    const after = await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems()
    eq(after.filter((s) => s.snapshotId === snap.snapshotId), [], 'listSnapshots after deleteSnapshot')
  }, { needs })

  await step('fork: kill the forks and the sandbox made from the snapshot', async () => {
    for (const s of made) eq(await s.kill(), true, `kill ${s.sandboxId}`)
  })
}

// networkSteps: E2B's default is internet egress; allowInternetAccess:false
// denies all; network.allowOut with denyOut 0.0.0.0/0 is an allowlist.
// peer and peerOther are addresses on the test's own network (no Internet
// here): a sandbox whose egress is open reaches both.
// rulesSteps: E2B Secrets (network.rules) add a header to the sandbox's
// HTTPS requests to a host: the sandbox never sees the value, a forged
// header is replaced, an update replaces the rules (and clears them when
// absent), and a rule grants no access.
async function rulesSteps() {
  check(rulesKey, 'E2B_RULES_KEY is not set')
  const rules = { [rulesHost]: [{ transform: { headers: { 'x-api-key': rulesKey } } }] }
  const status = async (sbx) => {
    // -k: without a rule the answer comes from the upstream itself, whose
    // test CA only rayd trusts.
    const r = await sbx.commands.run(`curl -sS -m 10 -k -o /dev/null -w '%{http_code}' -X POST -H 'x-api-key: forged' https://${rulesHost}/v1/messages || true`)
    return r.stdout.trim()
  }
  let sbx
  const made = 'network rules: create with rules'
  await step(made, async () => {
    sbx = await track(Sandbox.create({ metadata: { suite: run }, network: { rules } }))
  })
  await step('network rules: the header is added, a forged one replaced, the value never in the sandbox', async () => {
    const r = await sbx.commands.run(`curl -sS -m 10 -X POST -H 'x-api-key: forged' https://${rulesHost}/v1/messages`)
    check(r.stdout.includes('from upstream'), `the upstream's answer: ${JSON.stringify(r.stdout)}`)
    const look = await sbx.commands.run(`env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; grep -rIlF -e ${sh(rulesKey)} /home /tmp /run /etc 2>/dev/null; true`)
    check(!look.stdout.includes(rulesKey) && !look.stderr.includes(rulesKey), 'the key is visible inside the sandbox')
  }, { needs: [made] })
  await step('network rules: updateNetwork replaces the rules, and clears them when absent', async () => {
    await sbx.updateNetwork({})
    eq(await status(sbx), '401', 'after an update without rules')
    await sbx.updateNetwork({ rules })
    eq(await status(sbx), '200', 'after an update with the rules again')
  }, { needs: [made] })
  await step('network rules: a rule grants no access', async () => {
    const closed = await track(Sandbox.create({ metadata: { suite: run }, allowInternetAccess: false, network: { rules } }))
    const got = await status(closed)
    check(got !== '200' && got !== '401', `a deny-all sandbox reached the rule's host (HTTP ${got})`)
    eq(await closed.kill(), true, 'kill')
  })
  await step('network rules: kill', async () => {
    if (sbx) eq(await sbx.kill(), true, 'kill')
  }, { needs: [made] })
}

// gitSteps: E2B's own git API (sandbox.git, which runs git through the
// process API) against a private repository: clone with a token, commit
// and push a branch, status; the token is not left in the repository.
async function gitSteps() {
  check(gitToken, 'E2B_GIT_TOKEN is not set')
  const creds = { username: 'bot', password: gitToken }
  const repo = '/home/user/e2b-repo'
  let sbx
  const made = 'git: clone with a token'
  await step(made, async () => {
    sbx = await track(Sandbox.create({ metadata: { suite: run } }))
    await sbx.git.clone(gitURL, { path: repo, ...creds })
    eq(await sbx.files.read(`${repo}/README`), 'hello\n', 'README')
  })
  await step('git: commit and push a branch', async () => {
    await sbx.git.configureUser('E2B', 'e2b@example.com')
    await sbx.git.createBranch(repo, 'e2b-branch')
    await sbx.files.write(`${repo}/e2b.txt`, 'from e2b\n')
    await sbx.git.add(repo, { all: true })
    await sbx.git.commit(repo, 'from the e2b sdk')
    await sbx.git.push(repo, { ...creds, remote: 'origin', branch: 'e2b-branch', setUpstream: true })
    const st = await sbx.git.status(repo)
    eq(st.currentBranch, 'e2b-branch', 'status currentBranch')
    const cfg = await sbx.files.read(`${repo}/.git/config`)
    check(!cfg.includes(gitToken), 'the token is left in .git/config')
  }, { needs: [made] })
  await step('git: kill', async () => {
    if (sbx) eq(await sbx.kill(), true, 'kill')
  }, { needs: [made] })
}

async function networkSteps(open, needs) {
  const curl = (addr) => `curl -fsS -m 5 -o /dev/null -w '%{http_code}' http://${addr}/`
  const reaches = async (sbx, addr) => {
    try {
      const r = await sbx.commands.run(curl(addr))
      return r.stdout === '200'
    } catch (e) {
      // curl's exit codes for a connection that failed or was refused
      // (7, 28, 56, 22 for the egress proxy's 403); anything else (127: no
      // curl) proves nothing about the policy.
      if (e instanceof CommandExitError && [7, 22, 28, 56].includes(e.exitCode)) return false
      throw e
    }
  }
  if (!peer || !peerOther) {
    for (const n of ['network: default egress is open', 'network: allowInternetAccess false denies all', 'network: an allowlist on create']) {
      await step(n, async () => { throw new Skip('no --peer/--peer-other: no address to test egress against') })
    }
    return
  }
  await step('network: default egress is open', async () => {
    eq(await reaches(open, peer), true, `an open sandbox reaches ${peer}`)
    eq(await reaches(open, peerOther), true, `an open sandbox reaches ${peerOther}`)
  }, { needs })

  await step('network: allowInternetAccess false denies all', async () => {
    const s = await track(Sandbox.create({ allowInternetAccess: false, metadata: { suite: run, role: 'net-deny' } }))
    try {
      eq(await reaches(s, peer), false, `a deny-all sandbox reaches ${peer}`)
      const info = await s.getInfo()
      eq(info.allowInternetAccess, false, 'getInfo allowInternetAccess')
    } finally {
      await s.kill()
    }
  })

  await step('network: an allowlist on create', async () => {
    const s = await track(Sandbox.create({
      network: { allowOut: [peer], denyOut: [ALL_TRAFFIC] },
      metadata: { suite: run, role: 'net-allow' },
    }))
    try {
      eq(await reaches(s, peer), true, `the allowlisted ${peer}`)
      eq(await reaches(s, peerOther), false, `${peerOther}, outside the allowlist`)
      const info = await s.getInfo()
      check(info.network?.allowOut?.some((a) => a === peer || a === `${peer}/32`), `getInfo network.allowOut ${JSON.stringify(info.network)}`)
      check(info.network?.denyOut?.includes(ALL_TRAFFIC), `getInfo network.denyOut ${JSON.stringify(info.network)}`)
    } finally {
      await s.kill()
    }
  })
}

// ---- debug mode: one sandbox, no control plane -----------------------------

async function debug() {
  let sbx
  let ci
  const c = 'debug: create (no control-plane call)'
  await step(c, async () => {
    sbx = await Sandbox.create()
    eq(sbx.sandboxId, 'debug_sandbox_id', 'the debug sandbox id')
    eq(await sbx.isRunning(), true, 'isRunning')
    ci = await CodeInterpreter.create()
  })
  await commandSteps(sbx, 'debug: ', [c])
  await fileSteps(sbx, 'debug: ', [c])
  await ptySteps(sbx, 'debug: ', [c])
  await codeSteps(ci, 'debug: ', [c])
}

// ---- main ------------------------------------------------------------------

process.on('unhandledRejection', (e) => {
  failed.push('unhandled rejection')
  console.log(`FAIL unhandled rejection: ${describe(e)}`)
})

const started = Date.now()
console.log(`E2B scenario ${run}: ${debugMode ? 'debug mode' : 'full'}; e2b SDK against ${process.env.E2B_API_URL ?? '(no E2B_API_URL)'}, sandboxes at ${process.env.E2B_SANDBOX_URL ?? '(no E2B_SANDBOX_URL)'}`)
try {
  if (rulesHost) await rulesSteps()
  else if (gitURL) await gitSteps()
  else if (debugMode) await debug()
  else await full()
} catch (e) {
  failed.push('scenario')
  console.log(`FAIL scenario: ${describe(e)}`)
} finally {
  if (!debugMode) {
    for (const s of created) await s.kill().catch(() => {})
  }
}
console.log(`\n${passed} passed, ${failed.length} failed, ${skipped.length} skipped in ${Math.round((Date.now() - started) / 1000)} s`)
if (skipped.length) console.log(`skipped: ${skipped.join('; ')}`)
if (failed.length) {
  console.log(`failed: ${failed.join('; ')}`)
  process.exit(1)
}
process.exit(0)
