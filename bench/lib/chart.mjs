// Hand-written SVG: median cost against store size, one panel per store workload, log y axis.
const PANELS = [
  ['upsert', 'upsert one session'],
  ['list_limit50', 'sessions_list limit 50'],
  ['list_active_kinds', 'sessions_list activeMinutes + kinds'],
  ['writers8', '8 concurrent writers (round)'],
]
const COLORS = { baseline: '#d9661f', sqlite: '#2a9d4b', sessionTools: '#1f6fd9' }
const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

export function renderChart({ meta, results, sizes }) {
  const pw = 300, ph = 240, m = { l: 56, r: 14, t: 34, b: 40 }, gap = 20
  const W = PANELS.length * (pw + gap) + gap, H = ph + 110
  const parts = []
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`)
  parts.push(`<rect width="100%" height="100%" fill="#fff"/>`)
  parts.push(`<text x="${gap}" y="20" font-size="14" font-weight="bold">session-tools vs the file-store and better-sqlite3 baselines: median ms per operation against store size (log scale)</text>`)
  parts.push(`<text x="${gap}" y="36" fill="#555">${esc(`${meta.mode} run, ${meta.date}, Node ${meta.node}, ${meta.cpus}`)}</text>`)
  PANELS.forEach(([wl, title], p) => {
    const x0 = gap + p * (pw + gap), y0 = 50
    const rows = results.filter((r) => r.workload === wl)
    const vals = rows.flatMap((r) => [r.baseline.medianMs, r.sqlite?.medianMs, r.sessionTools.medianMs]).filter((v) => v > 0)
    const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...vals, 1))))
    const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...vals, 1) * 1.0001)))
    const iw = pw - m.l - m.r, ih = ph - m.t - m.b
    const sx = (i) => x0 + m.l + (sizes.length === 1 ? iw / 2 : (i * iw) / (sizes.length - 1))
    const sy = (v) => y0 + m.t + ih - ((Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * ih
    parts.push(`<text x="${x0 + pw / 2}" y="${y0 + 16}" text-anchor="middle" font-weight="bold">${esc(title)}</text>`)
    parts.push(`<rect x="${x0 + m.l}" y="${y0 + m.t}" width="${iw}" height="${ih}" fill="none" stroke="#999"/>`)
    for (let d = lo; d <= hi * 1.0001; d *= 10) {
      const y = sy(d)
      parts.push(`<line x1="${x0 + m.l}" x2="${x0 + m.l + iw}" y1="${y}" y2="${y}" stroke="#e3e3e3"/>`)
      parts.push(`<text x="${x0 + m.l - 4}" y="${y + 4}" text-anchor="end">${d >= 1 ? d : d.toPrecision(1)} ms</text>`)
    }
    sizes.forEach((s, i) => parts.push(`<text x="${sx(i)}" y="${y0 + m.t + ih + 16}" text-anchor="middle">${s.toLocaleString('en-US')}</text>`))
    parts.push(`<text x="${x0 + m.l + iw / 2}" y="${y0 + m.t + ih + 32}" text-anchor="middle" fill="#555">sessions in store</text>`)
    for (const side of ['baseline', 'sqlite', 'sessionTools']) {
      const pts = sizes.map((s, i) => { const r = rows.find((x) => x.size === s); return r && r[side]?.medianMs > 0 ? [sx(i), sy(r[side].medianMs), r[side].medianMs] : null }).filter(Boolean)
      if (!pts.length) continue
      parts.push(`<polyline fill="none" stroke="${COLORS[side]}" stroke-width="2" points="${pts.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' ')}"/>`)
      for (const [x, y, v] of pts) parts.push(`<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="3" fill="${COLORS[side]}"><title>${side} ${v} ms</title></circle>`)
    }
  })
  const ly = H - 22
  parts.push(`<rect x="${gap}" y="${ly - 9}" width="14" height="4" fill="${COLORS.baseline}"/><text x="${gap + 20}" y="${ly}">baseline (sessions.json file store, JS)</text>`)
  parts.push(`<rect x="${gap + 260}" y="${ly - 9}" width="14" height="4" fill="${COLORS.sqlite}"/><text x="${gap + 280}" y="${ly}">sqlite baseline (better-sqlite3, JS, sync)</text>`)
  parts.push(`<rect x="${gap + 520}" y="${ly - 9}" width="14" height="4" fill="${COLORS.sessionTools}"/><text x="${gap + 540}" y="${ly}">session-tools (SQLite, Rust addon)</text>`)
  const h = results.find((r) => r.workload === 'history_limit20')
  if (h) parts.push(`<text x="${gap}" y="${ly + 16}" fill="#333">${esc(`sessions_history limit 20 of ${h.size.toLocaleString('en-US')} messages: file baseline ${h.baseline.medianMs} ms, sqlite baseline ${h.sqlite?.medianMs ?? '-'} ms, session-tools ${h.sessionTools.medianMs} ms`)}</text>`)
  parts.push('</svg>')
  return parts.join('\n') + '\n'
}
