// The `Link` header (RFC 8288 §3): `<target>; name=value; name="quoted, value"`, several per field,
// several fields joined with commas. A comma inside the <target> or a quoted string separates nothing,
// so the header cannot be split on commas first.

/** One link: its target as written (a URI reference) and its parameters, names in lower case. */
export interface LinkValue {
  target: string
  params: ReadonlyMap<string, string>
}

const OWS = /[ \t]/
/** Characters that end a parameter name or an unquoted value. */
const TOKEN_END = /[ \t;,="]/

/**
 * Parses a `Link` header value. A parameter that appears twice keeps its first value, as RFC 8288
 * §3.3 asks for `rel`. Malformed parts are skipped up to the next link rather than failing the
 * whole header, so one bad link does not hide a good `next`.
 */
export function parseLinkHeader(header: string): LinkValue[] {
  const links: LinkValue[] = []
  let i = 0
  const skipWhitespace = () => {
    while (i < header.length && OWS.test(header.charAt(i))) i++
  }
  const skipToNextLink = () => {
    while (i < header.length && header.charAt(i) !== ',') {
      if (header.charAt(i) === '"') readQuoted()
      else i++
    }
  }
  const readToken = () => {
    const start = i
    while (i < header.length && !TOKEN_END.test(header.charAt(i))) i++
    return header.slice(start, i)
  }
  const readQuoted = () => {
    let value = ''
    i++ // the opening quote
    while (i < header.length && header.charAt(i) !== '"') {
      if (header.charAt(i) === '\\') i++
      value += header.charAt(i)
      i++
    }
    i++ // the closing quote
    return value
  }

  while (i < header.length) {
    skipWhitespace()
    if (header.charAt(i) === ',') {
      i++
      continue
    }
    if (header.charAt(i) !== '<') {
      skipToNextLink()
      continue
    }
    const close = header.indexOf('>', i)
    if (close === -1) break
    const target = header.slice(i + 1, close)
    i = close + 1
    const params = new Map<string, string>()
    for (;;) {
      skipWhitespace()
      if (header.charAt(i) !== ';') break
      i++
      skipWhitespace()
      const name = readToken().toLowerCase()
      skipWhitespace()
      let value = ''
      if (header.charAt(i) === '=') {
        i++
        skipWhitespace()
        value = header.charAt(i) === '"' ? readQuoted() : readToken()
      }
      if (name !== '' && !params.has(name)) params.set(name, value)
    }
    skipToNextLink()
    links.push({ target, params })
  }
  return links
}

/** The target of the first link whose `rel` includes `relation` (relation types are case-insensitive). */
export function findLink(header: string | null, relation: string): string | undefined {
  if (header === null) return undefined
  const wanted = relation.toLowerCase()
  return parseLinkHeader(header).find((link) =>
    (link.params.get('rel') ?? '').toLowerCase().split(/[ \t]+/).includes(wanted),
  )?.target
}
