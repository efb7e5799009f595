// Set-up of tests/faults/fault_check's endpoints scenario: the operator listener of
// tests/client/listener_key.mjs registers a fresh agent key in the community (NIP-98), and a
// fresh member publishes a push lease (kind 30350), so that every kind 9 naming the agent
// (publisher.mjs --mention) makes one listener delivery and one push wake. Prints the agent's
// public key.
//
//   node endpoints_setup.mjs ws://127.0.0.1:PORT
import { createRequire } from 'node:module'
import { listenerSecret } from '../client/listener_key.mjs'

const require = createRequire(new URL('../client/package.json', import.meta.url))
const { generateSecretKey, getPublicKey, finalizeEvent } = require('nostr-tools/pure')
const { getToken } = require('nostr-tools/nip98')
const WebSocket = require('ws')

const url = process.argv[2]
if (!url) {
  console.error('usage: node endpoints_setup.mjs ws://HOST:PORT')
  process.exit(2)
}
const http = url.replace(/^ws/, 'http').replace(/\/$/, '')
const fail = (m) => { console.error(`endpoints_setup: ${m}`); process.exit(1) }
const now = () => Math.floor(Date.now() / 1000)

const agent = getPublicKey(generateSecretKey())
const regUrl = `${http}/operator/listener/pubkeys`
const payload = { pubkeys: [agent] }
const token = await getToken(regUrl, 'POST', (t) => finalizeEvent(t, listenerSecret), true, payload)
const reg = await fetch(regUrl, {
  method: 'POST', body: JSON.stringify(payload),
  headers: { authorization: token, 'content-type': 'application/json' },
})
const regBody = await reg.text()
if (reg.status !== 200) fail(`registration answered ${reg.status} ${regBody}`)

const sk = generateSecretKey()
const ws = new WebSocket(url)
const lease = finalizeEvent({
  kind: 30350, created_at: now(), content: '',
  tags: [['d', 'fault-phone'], ['endpoint', 'fault-grant'], ['app', 'waggle-faults'],
    ['expiration', String(now() + 3600)], ['generation', '1']],
}, sk)
await new Promise((resolve) => {
  const timer = setTimeout(() => fail('no OK for the push lease within 10 s'), 10000)
  ws.on('error', (e) => fail(`websocket: ${e.message}`))
  ws.on('message', (data) => {
    const m = JSON.parse(data)
    if (m[0] === 'AUTH') {
      const auth = finalizeEvent({ kind: 22242, created_at: now(), content: '',
        tags: [['relay', url], ['challenge', m[1]]] }, sk)
      ws.send(JSON.stringify(['AUTH', auth]))
    } else if (m[0] === 'OK' && m[1] !== lease.id) {
      if (!m[2]) fail(`AUTH refused: ${m[3]}`)
      ws.send(JSON.stringify(['EVENT', lease]))
    } else if (m[0] === 'OK') {
      if (!m[2]) fail(`the push lease was refused: ${m[3]}`)
      clearTimeout(timer)
      ws.close()
      resolve()
    }
  })
})
console.log(agent)
