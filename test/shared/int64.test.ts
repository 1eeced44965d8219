import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import Sqlite from 'better-sqlite3'
import { INT64_MAX as INT64_MAX_VALUE, INT64_MIN, integerTextWithin, parseIntegerText } from '../../src/shared/int64.js'
import { ENGINES, errorBody, listPetsText, postPet, useTestApp } from '../helper.js'

// Every expectation here is on the raw response text: JSON.parse would round these ids to doubles.

const ABOVE_2_53 = '9007199254740993'
const INT64_MAX = '9223372036854775807'

/** The id in a raw pet body, read as text so that no digit is lost. */
function rawId(body: string): string {
  const id = /"id":(\d+)/.exec(body)?.[1]
  assert.ok(id !== undefined, `no id in ${body}`)
  return id
}

for (const engine of ENGINES) {
  describe(`int64 categoryId on ${engine}`, () => {
    const fx = useTestApp(engine)

    for (const categoryId of [ABOVE_2_53, INT64_MAX]) {
      it(`keeps every digit of categoryId ${categoryId} through create, get and list`, async () => {
        const created = await postPet(fx.testApp, fx.key, `{"name":"Big category","categoryId":${categoryId}}`)
        assert.equal(created.statusCode, 201, created.body)
        const id = rawId(created.body)
        const expected = `{"id":${id},"name":"Big category","categoryId":${categoryId}}`
        assert.equal(created.body, expected)

        const fetched = await fx.testApp.request(fx.key, { method: 'GET', url: `/v1/pets/${id}` })
        assert.equal(fetched.statusCode, 200, fetched.body)
        assert.equal(fetched.body, expected)

        assert.ok((await listPetsText(fx.testApp, fx.key)).includes(expected), 'the list does not hold the exact pet')
      })
    }

    for (const categoryId of ['9223372036854775808', '-9223372036854775809', '99999999999999999999']) {
      it(`rejects categoryId ${categoryId}, outside int64, with 400 naming 'categoryId'`, async () => {
        const before = await listPetsText(fx.testApp, fx.key)
        const response = await postPet(fx.testApp, fx.key, `{"name":"Too big","categoryId":${categoryId}}`)
        assert.equal(response.statusCode, 400, response.body)
        const body = errorBody(response)
        assert.equal(body.code, 'invalid_request')
        assert.ok(body.message.includes("'categoryId'"), body.message)
        assert.equal(await listPetsText(fx.testApp, fx.key), before, 'a rejected create stored a pet')
      })
    }
  })

  // Only a row written straight into the database can carry an id past 2^53: the API assigns ids
  // one by one. The setup is SQL for one engine, so other engines skip until they get their own.
  const skip = engine === 'sqlite' ? false : 'seeding a pet id above 2^53 is written for SQLite only'
  describe(`int64 pet ids on ${engine}`, { skip }, () => {
    const fx = useTestApp(engine)
    before(() => {
      const { database } = fx.testApp.config
      if (database.engine !== 'sqlite') throw new Error('this setup writes to a SQLite file')
      const db = new Sqlite(database.path)
      try {
        db.exec(
          `INSERT INTO pets (id, name, category_id, status, created_at) VALUES (${ABOVE_2_53}, 'big', 1, NULL, 0)`,
        )
      } finally {
        db.close()
      }
    })

    it('gets a pet whose id is above 2^53 with every digit of its id', async () => {
      const response = await fx.testApp.request(fx.key, { method: 'GET', url: `/v1/pets/${ABOVE_2_53}` })
      assert.equal(response.statusCode, 200, response.body)
      assert.ok(response.body.includes(`"id":${ABOVE_2_53}`), response.body)
      assert.equal(response.body, `{"id":${ABOVE_2_53},"name":"big","categoryId":1}`)
    })

    it('lists a pet whose id is above 2^53 with every digit of its id', async () => {
      const response = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets' })
      assert.equal(response.statusCode, 200, response.body)
      assert.equal(response.body, `[{"id":${ABOVE_2_53},"name":"big","categoryId":1}]`)
    })

    it('gives the next created pet the id after it, exactly, in the body and the Location', async () => {
      const response = await postPet(fx.testApp, fx.key, '{"name":"next","categoryId":2}')
      assert.equal(response.statusCode, 201, response.body)
      assert.equal(response.body, '{"id":9007199254740994,"name":"next","categoryId":2}')
      assert.equal(response.headers.location, `${fx.testApp.config.publicBaseUrl}/v1/pets/9007199254740994`)

      const fetched = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets/9007199254740994' })
      assert.equal(fetched.statusCode, 200, fetched.body)
      assert.equal(fetched.body, response.body)
    })

    it('answers 404, not 400, for the largest int64 id when no pet has it', async () => {
      const response = await fx.testApp.request(fx.key, { method: 'GET', url: `/v1/pets/${INT64_MAX}` })
      assert.equal(response.statusCode, 404, response.body)
      assert.equal(errorBody(response).code, 'not_found')
    })
  })
}

describe('integerTextWithin', () => {
  // The reference: the text parsed as a BigInt and compared exactly.
  const reference = (text: string, minimum: bigint, maximum: bigint) => {
    const parsed = parseIntegerText(text)
    return parsed !== undefined && parsed >= minimum && parsed <= maximum
  }
  const P53 = 2n ** 53n
  const bounds = [INT64_MIN, -P53 - 1n, -P53, -P53 + 1n, -1n, 0n, 1n, 999_999_999_999_999n, 10n ** 15n, P53 - 1n, P53, P53 + 1n, INT64_MAX_VALUE]
  // Texts at every length that matters, around the bounds and the 15-digit edge, and malformed ones.
  const texts = new Set(['', '-', '-0', '0', '00', '01', '+1', '1e3', ' 1', '1 ', '1.0', '１', '9'.repeat(15), '9'.repeat(16), '1' + '0'.repeat(15)])
  for (const bound of bounds) for (const delta of [-1n, 0n, 1n]) texts.add(String(bound + delta))
  for (let length = 1; length <= 21; length++) {
    texts.add('7'.repeat(length))
    texts.add(`-${'3'.repeat(length)}`)
    texts.add(`1${'0'.repeat(length - 1)}`)
  }

  it('answers as the exact BigInt comparison for every text and pair of bounds', () => {
    let compared = 0
    for (const text of texts) {
      for (const minimum of bounds) {
        for (const maximum of bounds) {
          if (minimum > maximum) continue
          assert.equal(integerTextWithin(text, minimum, maximum), reference(text, minimum, maximum), `${JSON.stringify(text)} in [${minimum}, ${maximum}]`)
          compared++
        }
      }
    }
    assert.ok(compared > 5_000)
  })
})
