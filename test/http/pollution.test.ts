import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { DIRECT_ENGINES, errorBody, listPetsText, postPet, useTestApp } from '../helper.js'

/*
 * Prototype pollution through the API. An attacker who could set a property on Object.prototype
 * through a body or a query string would change how every later request is validated and
 * answered (a polluted `status`, `isAdmin` or `polluted` member on every object). inject runs
 * the app in this process, so a pollution would show up here, on this process's prototypes.
 */

const BODIES: [what: string, body: string][] = [
  ['a __proto__ body', '{"__proto__": {"polluted": true}}'],
  ['a constructor.prototype body', '{"constructor": {"prototype": {"polluted": true}}}'],
  ['a prototype body', '{"prototype": {"polluted": true}}'],
  ['a valid pet with a __proto__ member', '{"name":"a","categoryId":1,"__proto__":{"polluted":true}}'],
  ['a valid pet with a constructor member', '{"name":"a","categoryId":1,"constructor":{"prototype":{"polluted":true}}}'],
  ['a valid pet with an escaped __proto__ key', '{"name":"a","categoryId":1,"\\u005f\\u005fproto\\u005f\\u005f":{"polluted":true}}'],
  ['a __proto__ member given twice', '{"name":"a","categoryId":1,"__proto__":{"polluted":true},"__proto__":{"polluted":true}}'],
  ['a __proto__ member setting a field', '{"categoryId":1,"__proto__":{"name":"from the prototype"}}'],
  ['a __proto__ object as the name', '{"name":{"__proto__":{"polluted":true}},"categoryId":1}'],
  ['a constructor.prototype object as the name', '{"name":{"constructor":{"prototype":{"polluted":true}}},"categoryId":1}'],
  ['a __proto__ object as the status', '{"name":"a","categoryId":1,"status":{"__proto__":{"polluted":true}}}'],
  ['a constructor.prototype object as the status', '{"name":"a","categoryId":1,"status":{"constructor":{"prototype":{"polluted":true}}}}'],
  ['a __proto__ object as the categoryId', '{"name":"a","categoryId":{"__proto__":{"polluted":true}}}'],
  ['an array of __proto__ objects', '[{"__proto__":{"polluted":true}},{"constructor":{"prototype":{"polluted":true}}}]'],
  ['a __proto__ nested inside an unknown member', '{"name":"a","categoryId":1,"x":{"y":[{"__proto__":{"polluted":true}}]}}'],
]

const QUERIES = [
  '?__proto__[polluted]=1',
  '?constructor[prototype][polluted]=1',
  '?__proto__.polluted=1',
  '?__proto__=polluted',
  '?constructor=polluted',
  '?prototype[polluted]=1',
  '?__proto__%5Bpolluted%5D=1',
  '?limit=5&__proto__[polluted]=1',
  '?status=sold&constructor[prototype][polluted]=1',
  '?status[__proto__][polluted]=1',
]

/** Every own key of the prototypes an attacker would aim at. */
function prototypeKeys(): Record<string, (string | symbol)[]> {
  return {
    Object: Reflect.ownKeys(Object.prototype),
    Array: Reflect.ownKeys(Array.prototype),
    Function: Reflect.ownKeys(Function.prototype),
    String: Reflect.ownKeys(String.prototype),
  }
}

const PRISTINE = prototypeKeys()

function assertNotPolluted(): void {
  assert.equal(({} as Record<string, unknown>).polluted, undefined, 'every object now has a "polluted" member')
  assert.equal(Object.prototype.hasOwnProperty.call(Object.prototype, 'polluted'), false)
  assert.deepEqual(prototypeKeys(), PRISTINE, 'a prototype gained or lost a property')
}

for (const engine of DIRECT_ENGINES) {
  describe(`prototype pollution attempts on ${engine}`, () => {
    const fx = useTestApp(engine)
    let soldBefore: string
    before(async () => {
      assert.equal((await postPet(fx.testApp, fx.key, '{"name":"Before","categoryId":1,"status":"sold"}')).statusCode, 201)
      soldBefore = await listPetsText(fx.testApp, fx.key)
    })

    for (const [what, body] of BODIES) {
      it(`refuses ${what} with 400 invalid_request, stores nothing and pollutes nothing`, async () => {
        const stored = await listPetsText(fx.testApp, fx.key)
        const response = await postPet(fx.testApp, fx.key, body)
        assert.equal(response.statusCode, 400, response.body)
        assert.equal(errorBody(response).code, 'invalid_request')
        assertNotPolluted()
        assert.equal(await listPetsText(fx.testApp, fx.key), stored, 'a refused body stored a pet')
      })
    }

    for (const query of QUERIES) {
      it(`refuses the query ${query} with 400 invalid_request and pollutes nothing`, async () => {
        const response = await fx.testApp.request(fx.key, { method: 'GET', url: `/v1/pets${query}` })
        assert.equal(response.statusCode, 400, response.body)
        assert.equal(errorBody(response).code, 'invalid_request')
        assertNotPolluted()
      })
    }

    it('still creates, lists and gets pets normally afterwards, with no member it was not sent', async () => {
      const created = await postPet(fx.testApp, fx.key, '{"name":"After","categoryId":2}')
      assert.equal(created.statusCode, 201, created.body)
      const pet = JSON.parse(created.body) as { id: number }
      assert.deepEqual(pet, { id: pet.id, name: 'After', categoryId: 2 })

      const fetched = await fx.testApp.request(fx.key, { method: 'GET', url: `/v1/pets/${pet.id}` })
      assert.equal(fetched.statusCode, 200, fetched.body)
      assert.equal(fetched.body, created.body)

      const listed = await fx.testApp.request(fx.key, { method: 'GET', url: '/v1/pets?status=sold&limit=10' })
      assert.equal(listed.statusCode, 200, listed.body)
      assert.equal(listed.body, soldBefore)
      assert.doesNotMatch(await listPetsText(fx.testApp, fx.key), /polluted|prototype/)
      assertNotPolluted()
    })
  })
}
