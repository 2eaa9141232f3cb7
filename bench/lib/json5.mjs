// A small JSON5 reader (no dependencies): comments, trailing commas, single-quoted strings,
// unquoted (identifier) keys, hex numbers, leading/trailing decimal points, +/-Infinity, NaN.
// It stands in for the gateway's JSON5 parser. It reads plain runs of string characters with
// slice(), so it is probably faster than the json5 package's char-by-char lexer: if it errs, it
// errs in the baseline's favour.

const NUM = /[+-]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|Infinity|NaN)/y
const IDENT = /[$_\p{ID_Start}][$_\u200C\u200D\p{ID_Continue}]*/uy

export function parseJson5(text) {
  let i = 0
  const n = text.length
  const fail = (what) => {
    throw new SyntaxError(`JSON5: ${what} at ${i}`)
  }

  function ws() {
    for (;;) {
      const c = text.charCodeAt(i)
      if (c === 32 || c === 10 || c === 13 || c === 9 || c === 11 || c === 12 || c === 0xa0 || c === 0xfeff || c === 0x2028 || c === 0x2029) {
        i++
      } else if (c === 47) {
        const d = text.charCodeAt(i + 1)
        if (d === 47) {
          i += 2
          while (i < n) {
            const e = text.charCodeAt(i)
            if (e === 10 || e === 13 || e === 0x2028 || e === 0x2029) break
            i++
          }
        } else if (d === 42) {
          const j = text.indexOf('*/', i + 2)
          if (j < 0) fail('unterminated comment')
          i = j + 2
        } else fail('unexpected /')
      } else return
    }
  }

  function str() {
    const q = text.charCodeAt(i++)
    let out = ''
    let start = i
    for (;;) {
      if (i >= n) fail('unterminated string')
      const c = text.charCodeAt(i)
      if (c === q) {
        out += text.slice(start, i)
        i++
        return out
      }
      if (c === 10 || c === 13) fail('newline in string')
      if (c !== 92) {
        i++
        continue
      }
      out += text.slice(start, i)
      i++
      const e = text[i++]
      switch (e) {
        case 'b': out += '\b'; break
        case 'f': out += '\f'; break
        case 'n': out += '\n'; break
        case 'r': out += '\r'; break
        case 't': out += '\t'; break
        case 'v': out += '\v'; break
        case '0': out += '\0'; break
        case 'x': out += String.fromCharCode(parseInt(text.slice(i, i + 2), 16)); i += 2; break
        case 'u': out += String.fromCharCode(parseInt(text.slice(i, i + 4), 16)); i += 4; break
        case '\r': if (text[i] === '\n') i++; break
        case '\n': case '\u2028': case '\u2029': break
        default: if (e === undefined) fail('bad escape'); out += e
      }
      start = i
    }
  }

  function key() {
    const c = text[i]
    if (c === '"' || c === "'") return str()
    IDENT.lastIndex = i
    const m = IDENT.exec(text)
    if (!m) fail('bad key')
    i = IDENT.lastIndex
    return m[0]
  }

  function obj() {
    i++
    const o = {}
    ws()
    if (text[i] === '}') { i++; return o }
    for (;;) {
      const k = key()
      ws()
      if (text[i] !== ':') fail('expected :')
      i++
      const v = value()
      if (k === '__proto__') Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true })
      else o[k] = v
      ws()
      const c = text[i++]
      if (c === '}') return o
      if (c !== ',') fail('expected , or }')
      ws()
      if (text[i] === '}') { i++; return o }
    }
  }

  function arr() {
    i++
    const a = []
    ws()
    if (text[i] === ']') { i++; return a }
    for (;;) {
      a.push(value())
      ws()
      const c = text[i++]
      if (c === ']') return a
      if (c !== ',') fail('expected , or ]')
      ws()
      if (text[i] === ']') { i++; return a }
    }
  }

  function lit(word, v) {
    if (!text.startsWith(word, i)) fail('bad literal')
    i += word.length
    return v
  }

  function num() {
    NUM.lastIndex = i
    const m = NUM.exec(text)
    if (!m) fail('unexpected character')
    i = NUM.lastIndex
    let s = m[0]
    let sign = 1
    if (s[0] === '+' || s[0] === '-') { sign = s[0] === '-' ? -1 : 1; s = s.slice(1) }
    if (s === 'Infinity') return sign * Infinity
    if (s === 'NaN') return NaN
    return sign * Number(s)
  }

  function value() {
    ws()
    switch (text[i]) {
      case '{': return obj()
      case '[': return arr()
      case '"': case "'": return str()
      case 't': return lit('true', true)
      case 'f': return lit('false', false)
      case 'n': return lit('null', null)
      default: return num()
    }
  }

  const v = value()
  ws()
  if (i < n) fail('trailing characters')
  return v
}
