// The documentation shipped with the package (issue 11, item 4): every relative link in the README
// and in docs/*.md leads to a file of the repository (and, for a `#fragment`, to a heading of that
// file), none leads outside it; docs/API.md covers every public method of `SessionTools`, every
// error code of the types and every event kind the engine emits.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const ROOT = fs.realpathSync(fileURLToPath(new URL('..', import.meta.url)))
const DOCS = path.join(ROOT, 'docs')
const PAGES = ['README.md', ...fs.readdirSync(DOCS).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]

/** The text of a page with fenced code blocks blanked out (kept as empty lines). */
function prose(text: string): string[] {
  let fenced = false
  return text.split('\n').map((line) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced
      return ''
    }
    return fenced ? '' : line
  })
}

/** Inline code spans removed, so that `[x](y)` inside backticks is not read as a link. */
function withoutCode(line: string): string {
  return line.replace(/`[^`]*`/g, '')
}

/** The link targets of a page (an absolute path), with their line numbers. */
function links(file: string): Array<{ target: string; line: number }> {
  const out: Array<{ target: string; line: number }> = []
  prose(fs.readFileSync(file, 'utf8')).forEach((raw, i) => {
    const line = withoutCode(raw)
    for (const m of line.matchAll(/\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) out.push({ target: m[1], line: i + 1 })
    for (const m of line.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/g)) out.push({ target: m[1], line: i + 1 })
  })
  return out
}

/** GitHub's anchors for the headings of a markdown file. */
function anchors(file: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  for (const line of prose(fs.readFileSync(file, 'utf8'))) {
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (!h) continue
    const base = h[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

const isExternal = (t: string) => /^[a-z][a-z0-9+.-]*:/i.test(t)

/** What is wrong with the relative links of `page` (relative to `root`). */
function problemsOf(root: string, page: string): string[] {
  const problems: string[] = []
  const at = path.join(root, page)
  for (const { target, line } of links(at)) {
    if (isExternal(target)) continue
    const [rawPath, fragment] = target.split('#', 2)
    const file = rawPath === '' ? at : path.resolve(path.dirname(at), decodeURI(rawPath))
    const rel = path.relative(root, file)
    const top = rel.split(path.sep)[0]
    if (rel.startsWith('..') || path.isAbsolute(rel)) problems.push(`${page}:${line}: ${target} leads outside the repository`)
    else if (top === 'node_modules' || top === 'target') problems.push(`${page}:${line}: ${target} leads into a build folder`)
    else if (!fs.existsSync(file)) problems.push(`${page}:${line}: ${target} names a file that does not exist`)
    else if (fragment && file.endsWith('.md') && !anchors(file).has(fragment)) {
      problems.push(`${page}:${line}: ${target} names a heading that ${rel} does not have`)
    }
  }
  return problems
}

describe('links in README.md and docs/*.md', () => {
  it('finds the pages and the links to check', () => {
    expect(PAGES).toEqual(expect.arrayContaining(['README.md', 'docs/API.md', 'docs/BEHAVIOUR.md', 'docs/INTEGRATION.md']))
    const relative = PAGES.flatMap((p) => links(path.join(ROOT, p))).filter((l) => !isExternal(l.target))
    expect(relative.length).toBeGreaterThan(20)
  })

  for (const page of PAGES) {
    it(`${page}: every relative link leads to a file of the repository, and to a heading there`, () => {
      expect(problemsOf(ROOT, page)).toEqual([])
    })
  }

  it('no page refers to the shared design folder outside the repository', () => {
    for (const page of PAGES) expect(fs.readFileSync(path.join(ROOT, page), 'utf8'), page).not.toMatch(/\.\.\/shared/)
  })

  it('the link checker itself catches a missing file, an escaping link, a missing heading and a link into a build folder', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'st-links-'))
    try {
      fs.mkdirSync(path.join(root, 'docs'))
      fs.mkdirSync(path.join(root, 'target'))
      fs.writeFileSync(path.join(root, 'target', 'x.md'), '# X\n')
      fs.writeFileSync(path.join(root, 'docs', 'other.md'), '# Other page\n')
      fs.writeFileSync(
        path.join(root, 'docs', 'probe.md'),
        '# A heading\n\n[ok](#a-heading) [ok2](other.md#other-page) [gone](nope.md) [out](../../x.md)\n' +
          '[bad](#no-such) [build](../target/x.md) `[code](nope2.md)`\n\n```\n[fenced](nope3.md)\n```\n',
      )
      expect(problemsOf(root, 'docs/probe.md')).toEqual([
        'docs/probe.md:3: nope.md names a file that does not exist',
        'docs/probe.md:3: ../../x.md leads outside the repository',
        'docs/probe.md:4: #no-such names a heading that docs/probe.md does not have',
        'docs/probe.md:4: ../target/x.md leads into a build folder',
      ])
    } finally {
      fs.rmSync(root, { recursive: true, force: true })
    }
  })
})

describe('docs/API.md covers the shipped surface', () => {
  const api = fs.readFileSync(path.join(DOCS, 'API.md'), 'utf8')
  const headings = prose(api).filter((l) => /^#{2,4}\s/.test(l))
  /** The text of the top-level section with this title, up to the next one. */
  const sectionOf = (title: string) => {
    const start = api.search(new RegExp(`^## \\d+\\. ${title}$`, 'm'))
    expect(start, title).toBeGreaterThan(0)
    const next = api.slice(start + 3).search(/^## /m)
    return next < 0 ? api.slice(start) : api.slice(start, start + 3 + next)
  }

  it('has a heading for every public method and accessor of SessionTools in index.d.ts', () => {
    const dts = fs.readFileSync(path.join(ROOT, 'index.d.ts'), 'utf8')
    const cls = dts.slice(dts.indexOf('export declare class SessionTools'))
    const names = [...cls.matchAll(/^\s+(?:static\s+)?(?:get\s+)?(\w+)\(/gm)].map((m) => m[1])
    expect(names).toEqual(expect.arrayContaining(['open', 'close', 'sessionsSend', 'createTools', 'path']))
    const missing = names.filter((n) => !headings.some((h) => h.includes(`\`${n}`) || h.includes(`.${n}(`)))
    expect(missing).toEqual([])
  })

  it('explains every error code of SessionToolsErrorCode', () => {
    const types = fs.readFileSync(path.join(ROOT, 'types.d.ts'), 'utf8')
    const union = /type SessionToolsErrorCode\s*=\s*([^\n]+)/.exec(types)![1]
    const codes = [...union.matchAll(/'([A-Z_]+)'/g)].map((m) => m[1])
    expect(codes.length).toBeGreaterThanOrEqual(4)
    const section = sectionOf('Error codes')
    for (const c of codes) expect(section, c).toContain(`| \`${c}\` |`)
  })

  it('documents exactly the event kinds the engine emits', () => {
    const emitted = new Set<string>()
    const walk = (dir: string) => {
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name)
        if (e.isDirectory()) walk(p)
        // the engine's own files (tests name stores and keys that look like event kinds)
        else if (e.name.endsWith('.rs') && !/(^|_)tests\.rs$/.test(e.name)) {
          for (const m of fs.readFileSync(p, 'utf8').matchAll(/"((?:run|a2a|send|delivery|subagent|store|config)\.[a-z_]+|session\.(?:yielded|resumed|resume_failed))"/g)) emitted.add(m[1])
        }
      }
    }
    walk(path.join(ROOT, 'src'))
    expect(emitted.size).toBeGreaterThan(10)
    const section = sectionOf('Events')
    const documented = new Set([...section.matchAll(/^\| `([a-z0-9]+\.[a-z_]+)` \|/gm)].map((m) => m[1]))
    expect([...documented].sort()).toEqual([...emitted].sort())
  })
})
