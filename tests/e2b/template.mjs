// E2B's template build API through Rayito's E2B gateway: the official
// SDK's Template builder and Template.build against the gateway in front
// of a root local platform, then Sandbox.create(name) of what was built.
// tests/e2b_template_test.go runs it with E2B_API_KEY, E2B_API_URL and
// E2B_SANDBOX_URL.
//
// Each step prints PASS or FAIL <step>: <why>; the exit status is 1 if any
// step failed.

import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { BuildError, Sandbox, Template, waitForPort } from 'e2b'

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

const suffix = Math.random().toString(36).slice(2, 8)
const ctxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'e2b-template-'))
fs.mkdirSync(path.join(ctxDir, 'app'))
fs.writeFileSync(path.join(ctxDir, 'app', 'greeting.txt'), 'hello from the context\n')
fs.writeFileSync(path.join(ctxDir, 'notes.txt'), 'notes\n')

const logs = []
const opts = { onBuildLogs: (e) => logs.push(String(e.message ?? e)) }

async function runIn(name, cmd) {
  const sbx = await Sandbox.create(name)
  try {
    return await sbx.commands.run(cmd)
  } finally {
    await sbx.kill()
  }
}

const built = `built-${suffix}`
await step('Template.build: fromTemplate(local), runCmd (user and root), copy, setEnvs, setWorkdir, setStartCmd(waitForPort)', async () => {
  const t = Template({ fileContextPath: ctxDir })
    .fromTemplate('local')
    .runCmd('echo built-by-run > /home/user/built.txt')
    .runCmd(`printf '#!/bin/sh\\necho hello from the template\\n' > /usr/local/bin/greet-${suffix} && chmod 755 /usr/local/bin/greet-${suffix}`, { user: 'root' })
    .copy('app', '/home/user/app')
    .copy('notes.txt', '/home/user/')
    .setEnvs({ GREETING: 'hi', OTHER: 'x y' })
    .setWorkdir('/home/user/app')
    .setStartCmd('python3 -m http.server 8123 --bind 127.0.0.1', waitForPort(8123))
  const info = await Template.build(t, built, opts)
  check(info.templateId === built && info.buildId, `build info ${JSON.stringify(info)}`)
  check(await Template.exists(built), 'Template.exists is false after the build')
})

await step('Sandbox.create(name) sees what the build made', async () => {
  const r = await runIn(built, `cat /home/user/built.txt && greet-${suffix} && cat /home/user/app/greeting.txt /home/user/notes.txt && echo "$GREETING|$OTHER" && pwd && whoami && stat -c %U /home/user/app/greeting.txt && curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8123/ || true`)
  const want = 'built-by-run\nhello from the template\nhello from the context\nnotes\nhi|x y\n/home/user/app\nuser\nuser\n'
  check(r.stdout.startsWith(want), `stdout ${JSON.stringify(r.stdout)}`)
})

await step('a failing RUN step: the SDK throws its BuildError', async () => {
  const t = Template().fromTemplate('local').runCmd('true').runCmd('echo failing on purpose; exit 3')
  try {
    await Template.build(t, `failing-${suffix}`, opts)
    throw new Error('the build succeeded')
  } catch (e) {
    check(e instanceof BuildError, `error ${e?.name}: ${e?.message}`)
    check(/run_step_failed/.test(e.message), `message ${e.message}`)
  }
})

const dock = `dock-${suffix}`
await step('fromDockerfile (3 lines) builds', async () => {
  const t = Template().fromDockerfile('FROM local\nRUN echo from-dockerfile > /home/user/dock.txt\nENV COLOR=blue\n')
  await Template.build(t, dock, opts)
  const r = await runIn(dock, 'cat /home/user/dock.txt && echo "$COLOR" && pwd && whoami')
  check(r.stdout === 'from-dockerfile\nblue\n/home/user\nuser\n', `stdout ${JSON.stringify(r.stdout)}`)
})

await step('what cannot be mapped is refused, naming it', async () => {
  for (const [t, want] of [
    [Template().fromImage('e2bdev/base'), /base image "e2bdev\/base" is not supported/],
    [Template({ fileContextPath: ctxDir }).fromTemplate('local').copy('notes.txt', '/home/user/n.txt', { mode: 0o600 }), /step 1 \(COPY\): a copy's mode/],
    [Template().fromTemplate('local').setUser('guest'), /step 1 \(USER\): user must be root or user/],
    [Template().fromTemplate('local').setStartCmd('sleep infinity', 'sleep 5'), /only waitForPort/],
  ]) {
    try {
      await Template.build(t, `refused-${suffix}`, opts)
      throw new Error(`built; want ${want}`)
    } catch (e) {
      check(want.test(e.message), `message ${e.message}, want ${want}`)
    }
  }
})

fs.rmSync(ctxDir, { recursive: true, force: true })
if (failed) {
  console.log('build logs:\n' + logs.join('\n'))
}
process.exit(failed ? 1 : 0)
