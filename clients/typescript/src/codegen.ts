// Generation of src/schema.ts from the OpenAPI document the service serves. Development only: the
// client's entry point (index.ts) never imports this file, so openapi-typescript and the server's
// code stay out of what users of the client load.
import os from 'node:os'
import path from 'node:path'
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript'
import ts from 'typescript'
import { main } from '../../../src/cli.js'

/** The generated file, committed; a test fails when it no longer matches the document. */
export const SCHEMA_FILE = path.join(import.meta.dirname, 'schema.ts')

const HEADER = `/**
 * Generated from the service's OpenAPI document by \`npm run generate:client\`. Do not edit by hand.
 * Integers of format int64 are \`bigint\`: the client parses responses losslessly.
 */

`

/**
 * The OpenAPI document as `petstore openapi` prints it, produced in this process from the current
 * source (not from a build that may be stale). The environment is fixed so that the generated file
 * does not depend on the machine that generated it.
 */
export async function currentOpenApiDocument(): Promise<OpenAPI3> {
  let stdout = ''
  let stderr = ''
  const outcome = await main(['openapi'], {
    env: { LOG_LEVEL: 'silent' },
    cwd: os.tmpdir(),
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
  })
  if (outcome !== 0) throw new Error(`petstore openapi failed (${outcome}): ${stderr}`)
  return JSON.parse(stdout) as OpenAPI3
}

/**
 * The text of src/schema.ts for `document`. JSON numbers lose digits above 2^53, so every
 * `format: int64` integer is typed `bigint`, which is what the client's lossless parser produces.
 */
export async function generateSchemaTypes(document: OpenAPI3): Promise<string> {
  const nodes = await openapiTS(document, {
    silent: true,
    enumValues: true,
    transform(schema) {
      if (schema.format === 'int64') return ts.factory.createKeywordTypeNode(ts.SyntaxKind.BigIntKeyword)
      return undefined
    },
  })
  return HEADER + astToString(nodes)
}
