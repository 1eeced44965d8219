// `npm run generate:client`: writes src/schema.ts from the current OpenAPI document.
import fs from 'node:fs'
import { SCHEMA_FILE, currentOpenApiDocument, generateSchemaTypes } from './codegen.js'

fs.writeFileSync(SCHEMA_FILE, await generateSchemaTypes(await currentOpenApiDocument()))
process.stdout.write(`Wrote ${SCHEMA_FILE}\n`)
