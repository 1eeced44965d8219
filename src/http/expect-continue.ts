import type { IncomingMessage, Server, ServerResponse } from 'node:http'

/**
 * Answers `Expect: 100-continue` with `100 Continue` only when the body is about to be read, which the
 * service does after every answer it can give from the head alone (the protocol checks, 405, load
 * shedding, authentication and its rate limits, the scope, 415, 413 by Content-Length). Node would send
 * it on arrival, so that a client without valid credentials uploaded its body for nothing, then got 401.
 *
 * A final answer given without the 100 carries `Connection: close`, which Node adds itself: the client
 * may send the body it held back anyway (curl does after a second), and no byte of it may be read as
 * the next request. The lingering close (src/http/http-protocol.ts) reads whatever does come.
 */
export function continueWhenBodyIsRead(server: Server): void {
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    // Fastify reads a body as a flowing stream; `resume` comes before its first read. Node also resumes an
    // unread body after the answer, to discard it, when a 100 would be a lie.
    request.once('resume', () => {
      if (!response.headersSent) response.writeContinue()
    })
    server.emit('request', request, response)
  })
}
