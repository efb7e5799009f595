// A NIP-43 invite round trip against a running relay with a stock Nostr client library
// (nostr-tools + ws), as a new user would try it, on an `invite` community whose admin key the
// caller set up (scripts/test's nip43-roundtrip stage does it with the command line):
//
//   WAGGLE_ADMIN_SK=<hex> WAGGLE_EXPIRED_CODE=<an expired code> node nip43_roundtrip.mjs ws://localhost:PORT
//
// Steps: a stranger is refused; the admin asks for an invite (REQ kind 28935) and gets a
// relay-signed code; a new key claims it (kind 28934) and is told "claim-accepted:", then posts;
// the relay's 13534 list names it; a reused, a made-up and an expired code are refused
// "restricted:"; the admin lists the members through NIP-86 (listallowedpubkeys) with
// nostr-tools' NIP-98 helper, the newcomer's own call is 403, and the admin's unallowpubkey
// ends the newcomer's open subscription with CLOSED "restricted:".
// Exits 0 when every step passed; otherwise prints the failing step and exits 1.
import { generateSecretKey, getPublicKey, finalizeEvent, verifyEvent } from 'nostr-tools/pure'
import { Relay, useWebSocketImplementation } from 'nostr-tools/relay'
import { getToken } from 'nostr-tools/nip98'
import { hexToBytes } from 'nostr-tools/utils'
import WebSocket from 'ws'

useWebSocketImplementation(WebSocket)

const url = process.argv[2] || process.env.WAGGLE_RELAY_URL || 'ws://localhost:7777'
const adminSkHex = process.env.WAGGLE_ADMIN_SK
const stepTimeoutMs = 10000
let step = 'start'
const relays = new Set()

function fail(message) {
  console.error(`nip43_roundtrip: FAILED at step "${step}": ${message}`)
  for (const r of relays) try { r.close() } catch {}
  process.exit(1)
}
setTimeout(() => fail('no result within 60 s'), 60000).unref()
process.on('unhandledRejection', (err) => fail(`unhandled rejection: ${err?.stack || err}`))
const log = (m) => console.log(`nip43_roundtrip: ${m}`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const withTimeout = (p, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`${what}: no answer`)), stepTimeoutMs))])

function user(name, sk = generateSecretKey()) {
  return { name, sk, pk: getPublicKey(sk), signer: async (t) => finalizeEvent(t, sk) }
}

async function connect(u) {
  step = `${u.name}: connect and AUTH`
  const relay = await withTimeout(Relay.connect(url), 'connect')
  relays.add(relay)
  relay.onauth = u.signer
  const started = Date.now()
  while (!relay.challenge) {
    if (Date.now() - started > stepTimeoutMs) throw new Error('no AUTH challenge')
    await sleep(20)
  }
  await withTimeout(relay.auth(u.signer), 'AUTH')
  return relay
}

async function publish(relay, u, template) {
  const ev = finalizeEvent({ created_at: Math.floor(Date.now() / 1000), content: '', tags: [], ...template }, u.sk)
  try {
    return { ok: true, reason: await withTimeout(relay.publish(ev), 'OK') }
  } catch (err) {
    return { ok: false, reason: String(err?.message || err) }
  }
}

function expect(cond, what) {
  if (!cond) fail(what)
}

async function main() {
  if (!adminSkHex) fail('WAGGLE_ADMIN_SK is not set')
  const admin = user('admin', hexToBytes(adminSkHex))
  const newcomer = user('newcomer')
  const late = user('late')

  step = 'a stranger is refused'
  const nr = await connect(newcomer)
  let r = await publish(nr, newcomer, { kind: 1, content: 'let me in' })
  expect(!r.ok && r.reason.startsWith('restricted:'), `stranger's post: ${JSON.stringify(r)}`)
  log(`stranger refused: "${r.reason}"`)

  step = 'admin asks for an invite (REQ kind 28935)'
  const ar = await connect(admin)
  const invite = await withTimeout(new Promise((resolve) => {
    const sub = ar.subscribe([{ kinds: [28935] }], {
      onevent(ev) { sub.close(); resolve(ev) },
    })
  }), 'invite')
  expect(verifyEvent(invite), 'the invite is not validly signed')
  const code = invite.tags.find((t) => t[0] === 'claim')?.[1]
  expect(code, `no claim tag in ${JSON.stringify(invite)}`)
  log(`admin got invite code ${code.slice(0, 8)}… signed by ${invite.pubkey.slice(0, 16)}…`)

  step = 'the newcomer claims it (kind 28934)'
  r = await publish(nr, newcomer, { kind: 28934, tags: [['-'], ['claim', code]] })
  expect(r.ok && r.reason.startsWith('claim-accepted:'), `claim: ${JSON.stringify(r)}`)
  log(`claim: "${r.reason}"`)
  r = await publish(nr, newcomer, { kind: 1, content: 'hello team' })
  expect(r.ok, `member's post: ${JSON.stringify(r)}`)

  step = 'the 13534 list shows the newcomer'
  let listed = false
  for (let i = 0; i < 50 && !listed; ++i) {
    const list = await withTimeout(new Promise((resolve) => {
      let found = null
      const sub = ar.subscribe([{ kinds: [13534] }], {
        onevent(ev) { found = ev },
        oneose() { sub.close(); resolve(found) },
      })
    }), '13534')
    listed = !!list && list.tags.some((t) => t[0] === 'member' && t[1] === newcomer.pk)
    if (!listed) await sleep(100)
  }
  expect(listed, 'the newcomer never appeared in the 13534 list')
  log('13534 lists the newcomer')

  step = 'a reused and a made-up code are refused'
  const lr = await connect(late)
  r = await publish(lr, late, { kind: 28934, tags: [['-'], ['claim', code]] })
  expect(!r.ok && r.reason.startsWith('restricted:'), `reused code: ${JSON.stringify(r)}`)
  r = await publish(lr, late, { kind: 28934, tags: [['-'], ['claim', 'not-a-code']] })
  expect(!r.ok && r.reason.startsWith('restricted:'), `made-up code: ${JSON.stringify(r)}`)
  log(`reused code refused: "${r.reason}"`)
  const expiredCode = process.env.WAGGLE_EXPIRED_CODE
  expect(expiredCode, 'WAGGLE_EXPIRED_CODE is not set')
  r = await publish(lr, late, { kind: 28934, tags: [['-'], ['claim', expiredCode]] })
  expect(!r.ok && r.reason.startsWith('restricted:'), `expired code: ${JSON.stringify(r)}`)
  log(`expired code refused: "${r.reason}"`)

  step = 'NIP-86 listallowedpubkeys with the NIP-98 helper'
  const httpUrl = url.replace(/^ws/, 'http')
  async function manage(u, method, params = []) {
    const body = { method, params }
    const token = await getToken(httpUrl, 'post', u.signer, true, body)
    const res = await fetch(httpUrl, {
      method: 'POST',
      headers: { 'Content-Type': 'application/nostr+json+rpc', Authorization: token },
      body: JSON.stringify(body),
    })
    return { status: res.status, answer: await res.json() }
  }
  let m = await manage(admin, 'listallowedpubkeys')
  expect(m.status === 200, `NIP-86 status ${m.status}: ${JSON.stringify(m.answer)}`)
  const keys = (m.answer.result || []).map((x) => x.pubkey)
  expect(keys.includes(newcomer.pk) && keys.includes(admin.pk), `members: ${JSON.stringify(m.answer)}`)
  log(`NIP-86 lists ${keys.length} members, the newcomer among them`)

  step = 'NIP-86 refuses a plain member'
  m = await manage(newcomer, 'listallowedpubkeys')
  expect(m.status === 403 && String(m.answer.error).startsWith('restricted:'), `member's call: ${m.status} ${JSON.stringify(m.answer)}`)
  log(`a member's call: ${m.status} "${m.answer.error}"`)

  step = 'NIP-86 unallowpubkey ends the newcomer\'s subscription'
  const closedWith = new Promise((resolve) => {
    nr.subscribe([{ kinds: [1] }], { onevent() {}, onclose(reason) { resolve(reason) } })
  })
  await sleep(200)  // the REQ is registered before the removal
  m = await manage(admin, 'unallowpubkey', [newcomer.pk])
  expect(m.status === 200 && m.answer.result === true, `unallowpubkey: ${m.status} ${JSON.stringify(m.answer)}`)
  const reason = await withTimeout(closedWith, 'CLOSED after unallowpubkey')
  expect(String(reason).startsWith('restricted:'), `closed with: ${reason}`)
  log(`the newcomer's subscription closed: "${reason}"`)

  for (const rl of relays) rl.close()
  log('all steps passed')
  process.exit(0)
}

main().catch((err) => fail(err?.stack || String(err)))
