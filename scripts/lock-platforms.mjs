// The registry reachable from our machines serves only the linux-x64 builds of a few packages
// that @napi-rs/cli pulls in for cross-compiling (@napi-rs/lzma, tar, wasm-tools). `npm install`
// then leaves their other-platform builds out of package-lock.json, and `npm ci` refuses the
// lock as out of sync. This adds those optional entries with their os/cpu/libc, so that `npm ci`
// accepts the lock and skips them, as it would with a lock written where they resolve.
// Run after `npm install` changes the lock: `node scripts/lock-platforms.mjs`.
import { readFileSync, writeFileSync } from 'node:fs'

const lock = JSON.parse(readFileSync('package-lock.json', 'utf8'))
const pkgs = lock.packages
const cpuOf = { 'arm-eabi': 'arm', arm64: 'arm64', x64: 'x64', ia32: 'ia32', ppc64: 'ppc64', riscv64: 'riscv64', s390x: 's390x', arm: 'arm' }
let added = 0
for (const [path, meta] of Object.entries(pkgs)) {
  for (const [dep, version] of Object.entries(meta.optionalDependencies ?? {})) {
    const at = `node_modules/${dep}`
    if (pkgs[at] || pkgs[`${path}/node_modules/${dep}`]) continue
    const m = /-(android|darwin|freebsd|linux|win32|wasm32)-(.+)$/.exec(dep)
    if (!m) continue
    const entry = { version, dev: meta.dev ?? undefined, optional: true }
    if (m[1] === 'wasm32') {
      entry.cpu = ['wasm32']
    } else {
      entry.os = [m[1]]
      const parts = m[2].split('-')
      entry.cpu = [cpuOf[parts[0] === 'arm' && parts[1] === 'eabi' ? 'arm-eabi' : parts[0]] ?? parts[0]]
      if (parts.includes('musl')) entry.libc = ['musl']
      if (parts.includes('gnu') || parts.includes('gnueabihf')) entry.libc = ['glibc']
    }
    pkgs[at] = entry
    added++
  }
}
writeFileSync('package-lock.json', JSON.stringify(lock, null, 2) + '\n')
console.log(`added ${added} other-platform optional entries to package-lock.json`)
