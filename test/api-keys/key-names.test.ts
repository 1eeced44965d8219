import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { KEY_NAME_MAX_LENGTH, checkKeyName } from '../../src/api-keys/api-keys.service.js'
import { useTestApp } from '../helper.js'

// The one check of a key's name, which `keys create` and any other caller of the service share; the
// CLI's messages for each refusal are in test/cli-errors.test.ts.

describe('a key name', () => {
  it('is kept without the white space around it, up to KEY_NAME_MAX_LENGTH characters', () => {
    assert.deepEqual(checkKeyName('  billing job \t'), { name: 'billing job' })
    assert.deepEqual(checkKeyName('é'.repeat(KEY_NAME_MAX_LENGTH)), { name: 'é'.repeat(KEY_NAME_MAX_LENGTH) })
  })

  it('is refused empty, blank or too long', () => {
    for (const given of ['', '   ', 'x'.repeat(KEY_NAME_MAX_LENGTH + 1)]) assert.deepEqual(checkKeyName(given), { refused: 'length' }, JSON.stringify(given))
  })

  it('is refused when it holds an API key, in any encoding, so that no listing prints a secret', () => {
    for (const given of ['ps_live_0123456789abcdefABCDEF0123456789', 'ci %70s_test_abcd']) assert.deepEqual(checkKeyName(given), { refused: 'key' }, given)
  })

  it('is refused with a control or reordering character, naming where it stands', () => {
    assert.deepEqual(checkKeyName('two\nlines'), { refused: 'unprintable', index: 3, character: '\n' })
    assert.deepEqual(checkKeyName('abc\u202Edcb'), { refused: 'unprintable', index: 3, character: '\u202E' })
  })
})

describe('the service', () => {
  const fx = useTestApp('sqlite')

  it('refuses to create a key with a name the check refuses, writing nothing', async () => {
    const before = await fx.testApp.storage.apiKeys.list()
    await assert.rejects(fx.testApp.createKey({ name: 'two\nlines' }), /checkKeyName/)
    assert.deepEqual(await fx.testApp.storage.apiKeys.list(), before)
  })

  it('stores a name without the white space around it', async () => {
    await fx.testApp.createKey({ name: '  padded\t' })
    assert.ok((await fx.testApp.storage.apiKeys.list()).some((key) => key.name === 'padded'))
  })
})
