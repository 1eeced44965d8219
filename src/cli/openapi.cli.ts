import { buildApp } from '../app.js'
import { loadConfig } from '../config.js'
import { createLogger } from '../logger.js'
import { type CliIo, withStorage } from './output.js'
import { parse } from './usage.js'

export const OPENAPI_HELP = 'Usage: petstore openapi\n\nPrints the OpenAPI 3.1 document the service serves at /v1/openapi.json.'

export async function openapiCommand(args: string[], io: CliIo): Promise<0> {
  parse('openapi', args, {})
  const config = loadConfig(io.env, io.cwd)
  const document = await withStorage({ ...config, database: { engine: 'sqlite', path: ':memory:' } }, undefined, async (storage) => {
    const app = await buildApp({ config, storage, logger: createLogger({ logLevel: 'silent' }) })
    await app.ready()
    const spec = app.swagger()
    await app.close()
    return spec
  })
  io.stdout(JSON.stringify(document, null, 2) + '\n')
  return 0
}
