import { type Attributes, SpanKind, SpanStatusCode, type Tracer, context, trace } from '@opentelemetry/api'

/**
 * A counter read once per turn of the event loop for the read cache, not a query of the request's own:
 * a span per read would cost more than the read.
 */
const UNTRACED = new Set(['version'])

/**
 * `repository` (SQLite, which no instrumentation covers) with a CLIENT span around each call made within
 * a traced request, named as the OpenTelemetry database conventions name a call that is not one
 * statement: `{db.operation.name} {db.collection.name}`, e.g. `findById pets`, `table` being the one it
 * keeps. Calls outside a request (migrations, the periodic flush of getPet counts) make none, as pg's
 * `requireParentSpan`. No statement parameters are recorded.
 */
export function traceSqliteRepository<R extends object>(repository: R, table: string, tracer: Tracer): R {
  const traced: Record<string, unknown> = {}
  for (const [name, member] of Object.entries(repository) as [string, unknown][]) {
    if (typeof member !== 'function' || UNTRACED.has(name)) {
      traced[name] = member
      continue
    }
    const method = member as (...args: unknown[]) => unknown
    const attributes: Attributes = { 'db.system.name': 'sqlite', 'db.operation.name': name, 'db.collection.name': table }
    const spanName = `${name} ${table}`
    traced[name] = (...args: unknown[]): unknown => {
      if (trace.getSpan(context.active()) === undefined) return method.apply(repository, args)
      return tracer.startActiveSpan(spanName, { kind: SpanKind.CLIENT, attributes }, (span) => {
        const failed = (error: unknown) => {
          span.setStatus({ code: SpanStatusCode.ERROR })
          span.setAttribute('error.type', errorType(error))
          span.end()
        }
        let result: unknown
        try {
          result = method.apply(repository, args)
        } catch (error) {
          failed(error)
          throw error
        }
        if (result instanceof Promise) {
          return result.then(
            (value: unknown) => {
              span.end()
              return value
            },
            (error: unknown) => {
              failed(error)
              throw error
            },
          )
        }
        span.end()
        return result
      })
    }
  }
  return traced as R
}

/** The SQLite result code (`SQLITE_BUSY`), or the class of the error: never its message. */
function errorType(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code
  if (typeof code === 'string') return code
  return error instanceof Error ? error.name : '_OTHER'
}
