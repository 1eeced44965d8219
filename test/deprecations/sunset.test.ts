import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { GET_PET_SUNSET } from '../../src/deprecations/deprecations.policy.js'
import { dayInWords } from '../../src/deprecations/deprecations.schemas.js'

// getPet's sunset is written once, in src/deprecations/deprecations.policy.ts; the code derives every
// form of it from there. The files below cannot import it: each mention they make is checked against it
// here, so that moving the sunset fails this test until every one of them says the new date.

const ROOT = path.resolve(import.meta.dirname, '..', '..')
const DAY_S = 86_400

const iso = GET_PET_SUNSET.toISOString()
/** Each way a file writes the sunset. */
const forms = {
  seconds: String(GET_PET_SUNSET.getTime() / 1000),
  day: iso.slice(0, 10),
  iso,
  isoWithoutMs: iso.replace('.000Z', 'Z'),
  httpDate: GET_PET_SUNSET.toUTCString(),
  inWords: dayInWords(GET_PET_SUNSET),
}

/** What each file says of the sunset, white space folded as it is in the file's text. */
const MENTIONS: Record<string, string[]> = {
  'ops/prometheus/rules.yml': [
    `its sunset (${forms.day}, src/deprecations/`,
    `(vector(time()) > ${forms.seconds} - 90 * 86400)`,
    `From its sunset, ${forms.day}, getPet answers 410.`,
  ],
  'ops/prometheus/sunset.test.yml': [`getPet's sunset (${forms.day})`, `From its sunset, ${forms.day}, getPet answers 410.`],
  'ops/grafana/petstore.json': [`before the sunset, ${forms.day}.`],
  'docs/spec/pet-store-spec.md': [`to be removed on ${forms.inWords}.`, `with removal on ${forms.inWords}.`],
  'README.md': [`from ${forms.inWords} it answers 410`, ` sunset: ${forms.httpDate} `],
  'docs/api.md': [`\`Sunset: ${forms.httpDate}\``, ` sunset: ${forms.httpDate} `],
  'docs/cli.md': [`sunset ${forms.iso},`, `"sunset": "${forms.iso}",`],
  'docs/configuration.md': [`no later than its sunset, ${forms.isoWithoutMs}, which the specification fixes`],
  'docs/observing.md': [`getPet's sunset, ${forms.day}, is 90 days away or less`],
  'clients/typescript/README.md': [`(410 from ${forms.inWords})`],
  'clients/typescript/src/index.ts': [`answers 410 \`gone\` from ${forms.inWords};`],
}

const folded = (file: string) =>
  fs
    .readFileSync(path.join(ROOT, file), 'utf8')
    // A YAML comment or a block scalar goes on over lines: read as one line of text.
    .replace(/\n\s*(# ?)?/g, ' ')
    .replace(/[ \t]+/g, ' ')

describe("getPet's sunset outside src/", () => {
  for (const [file, mentions] of Object.entries(MENTIONS)) {
    it(`is the one in deprecations.policy.ts wherever ${file} names it`, () => {
      const text = folded(file)
      for (const mention of mentions) assert.ok(text.includes(mention), `${file} should say: ${mention}`)
    })
  }

  it("is tested by promtool on both sides of the alert's start, 90 days before it", () => {
    const text = fs.readFileSync(path.join(ROOT, 'ops/prometheus/sunset.test.yml'), 'utf8')
    const cases = [...text.matchAll(/eval_time: (\d+)d\n +alertname: PetstoreGetPetCalledNearSunset\n +exp_alerts:( \[\])?/g)]
    const alertFrom = GET_PET_SUNSET.getTime() / 1000 - 90 * DAY_S
    const expected = cases.map((match) => ({ at: `${match[1]}d`, fires: match[2] === undefined }))
    assert.deepEqual(
      expected.map(({ fires }) => fires),
      [false, true],
      'one case before and one after',
    )
    for (const { at, fires } of expected) assert.equal(Number.parseInt(at) * DAY_S > alertFrom, fires, `eval_time ${at}`)
  })

  it('is written in headers as an IMF-fixdate (RFC 9110 §5.6.7) of the same instant', () => {
    assert.match(forms.httpDate, /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/)
    assert.equal(Date.parse(forms.httpDate), GET_PET_SUNSET.getTime())
  })
})

describe('dayInWords', () => {
  // Every month's first and last day, around midnight UTC, in years of one to five digits: the words
  // are those Intl writes for en-GB in UTC, whatever the machine's time zone.
  const days = [1, 1000, 1970, 2024, 2030, 99_999].flatMap((year) =>
    Array.from({ length: 12 }, (_, month) => [Date.UTC(year, month, 1), Date.UTC(year, month + 1, 0, 23, 59, 59, 999)]).flat(),
  )
  it(`writes ${days.length} days as toLocaleDateString does for en-GB in UTC`, () => {
    const inWords = days.map((ms) => dayInWords(new Date(ms)))
    const byIntl = days.map((ms) => new Date(ms).toLocaleDateString('en-GB', { day: 'numeric', month: 'long', year: 'numeric', timeZone: 'UTC' }))
    assert.deepEqual(inWords, byIntl)
  })
})
