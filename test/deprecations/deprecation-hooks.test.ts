import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { GET_PET_SUNSET } from '../../src/deprecations/deprecations.policy.js'
import { CONTRACT_ENGINES, ManualClock, buildTestApp, errorBody, postPet, useTestApp } from '../helper.js'

const SUNSET = GET_PET_SUNSET.toUTCString()
/** getPet's successor Link where PUBLIC_BASE_URL is `base`. */
const successorLink = (base: string) => `<${base}/v1/pets>; rel="successor-version"`

for (const engine of CONTRACT_ENGINES) {
  describe(`deprecated getPet on ${engine}`, () => {
    const fx = useTestApp(engine, { env: { GETPET_DEPRECATED_AT: '2027-01-01T00:00:00Z' } })
    let petId: number
    before(async () => {
      petId = (JSON.parse((await postPet(fx.testApp, fx.key, '{"name":"Old","categoryId":1}')).body) as { id: number }).id
    })

    it('announces Deprecation (configured date), Sunset and the successor on a 200', async () => {
      const response = await fx.testApp.request(fx.key, { method: 'GET', url: `/v1/pets/${petId}` })
      assert.equal(response.statusCode, 200)
      assert.equal(response.headers.deprecation, `@${Date.parse('2027-01-01T00:00:00Z') / 1000}`)
      assert.equal(response.headers.sunset, SUNSET)
      assert.equal(response.headers.link, successorLink(fx.testApp.config.publicBaseUrl))
    })

    it('announces the deprecation on its 404 and 401 too', async () => {
      const missing = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets/999999' })
      assert.equal(missing.statusCode, 404)
      assert.equal(missing.headers.sunset, SUNSET)
      const anonymous = await fx.testApp.app.inject({ method: 'GET', url: `/v1/pets/${petId}` })
      assert.equal(anonymous.statusCode, 401)
      assert.equal(anonymous.headers.deprecation, '@1798761600')
    })

    it('does not mark listPets or createPet as deprecated', async () => {
      const list = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets' })
      const create = await postPet(fx.testApp, fx.key, '{"name":"New","categoryId":1}')
      for (const response of [list, create]) {
        assert.equal(response.headers.deprecation, undefined)
        assert.equal(response.headers.sunset, undefined)
      }
    })

    it('still answers the millisecond before the sunset', async () => {
      fx.testApp.clock.ms = GET_PET_SUNSET.getTime() - 1
      const response = await fx.testApp.request(fx.key, { method: 'GET', url: `/v1/pets/${petId}` })
      assert.equal(response.statusCode, 200)
    })

    it('answers 410 gone from the sunset instant on, while listPets keeps working', async () => {
      fx.testApp.clock.ms = GET_PET_SUNSET.getTime()
      const response = await fx.testApp.request(fx.key, { method: 'GET', url: `/v1/pets/${petId}` })
      assert.equal(response.statusCode, 410)
      assert.equal(errorBody(response).code, 'gone')
      assert.ok(errorBody(response).message.includes(`GET ${fx.testApp.config.publicBaseUrl}/v1/pets instead`), errorBody(response).message)
      assert.equal(response.headers.sunset, SUNSET)
      assert.equal((await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets' })).statusCode, 200)
    })
  })
}

describe('deprecation date default', () => {
  it('sends @1795305600 (2026-11-22) when GETPET_DEPRECATED_AT is unset', async (t) => {
    const testApp = await buildTestApp('sqlite', { clock: new ManualClock() })
    t.after(() => testApp.close())
    const response = await testApp.app.inject({ method: 'GET', url: '/v1/pets/1' })
    assert.equal(response.headers.deprecation, '@1795305600')
  })
})

describe('the successor of getPet behind a base path', () => {
  const fx = useTestApp('sqlite', { env: { PUBLIC_BASE_URL: 'http://api.example.com/base' } })

  it('names listPets under PUBLIC_BASE_URL, base path included, as Location does', async () => {
    const created = await postPet(fx.testApp, fx.key, '{"name":"Based","categoryId":1}')
    assert.equal(created.headers.location, `http://api.example.com/base/v1/pets/${(JSON.parse(created.body) as { id: number }).id}`)
    for (const url of [created.headers.location.replace('http://api.example.com/base', ''), '/v1/pets/999999']) {
      const response = await fx.testApp.request(fx.key, { method: 'GET', url })
      assert.equal(response.headers.link, successorLink('http://api.example.com/base'), url)
    }
  })
})
