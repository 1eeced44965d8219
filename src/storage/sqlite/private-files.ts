import fs from 'node:fs'
import path from 'node:path'

/*
 * The SQLite files hold key ids, prefixes and hashes, the pets and the stored idempotent answers: they
 * are the service's alone, whatever the umask it was started under. SQLite creates a database 0644 less
 * the umask, and its -wal and -shm with the database's own mode, so a database created 0600 here keeps
 * its companions private too.
 */

/** Mode of the data folder the service creates. */
const PRIVATE_FOLDER = 0o700

/** Mode of the database, its -wal and -shm, and a backup. */
const PRIVATE_FILE = 0o600

/** The files SQLite keeps for a database at `file`. */
const companions = (file: string): string[] => [file, `${file}-wal`, `${file}-shm`]

/** The mode bits of `file`, or undefined when it does not exist. */
function modeOf(file: string): fs.Stats | undefined {
  return fs.statSync(file, { throwIfNoEntry: false })
}

const octal = (mode: number): string => (mode & 0o7777).toString(8).padStart(4, '0')

const mine = (stats: fs.Stats): boolean => process.getuid === undefined || stats.uid === process.getuid()

/** Creates `folder` (and any missing parent) as 0700, whatever the umask; an existing one is left as it is. */
export function makePrivateFolder(folder: string): void {
  fs.mkdirSync(folder, { recursive: true, mode: PRIVATE_FOLDER })
}

/**
 * Why the database at `file` must not be opened, as the end of a sentence that begins with the
 * variable naming it and the file, or undefined when it may be: its folder, or the database or one of its companions,
 * is writable by every user, who could then have replaced it with one holding a key of their own. Such a
 * database cannot be trusted, so it is refused rather than tightened.
 */
export function unsafePermissions(file: string): string | undefined {
  const real = fs.existsSync(file) ? fs.realpathSync(file) : path.resolve(file)
  const folder = path.dirname(real)
  const folderStats = modeOf(folder)
  if (folderStats !== undefined && (folderStats.mode & 0o002) !== 0) {
    return (
      `whose folder ${folder} is writable by every user (mode ${octal(folderStats.mode)}): another user could replace the database. ` +
      `Make it private (chmod 700 ${folder}), or move the database to a private folder, and start again`
    )
  }
  for (const companion of companions(real)) {
    const stats = modeOf(companion)
    if (stats !== undefined && (stats.mode & 0o002) !== 0) {
      return (
        `and ${companion} is writable by every user (mode ${octal(stats.mode)}): another user could have changed it. ` +
        `Check it, make it private (chmod 600 ${companion}), and start again`
      )
    }
  }
  return undefined
}

/**
 * Makes the database at `file` private before SQLite opens it: a new one is created empty as 0600 (SQLite
 * takes an empty file as a new database), and an existing one, its -wal and -shm, which this user owns,
 * lose any permission beyond 0600 (one made by an earlier release under umask 022 was 0644). `folder`
 * too, when the service created it, loses any beyond 0700. A file that cannot be made is left to SQLite,
 * whose error names the problem.
 */
export function makeDatabasePrivate(file: string, { ownFolder }: { ownFolder: boolean }): void {
  const real = fs.existsSync(file) ? fs.realpathSync(file) : path.resolve(file)
  if (ownFolder) tighten(path.dirname(real), PRIVATE_FOLDER)
  try {
    fs.closeSync(fs.openSync(real, 'wx', PRIVATE_FILE))
  } catch {
    // It exists, or its folder cannot be written: SQLite says which.
  }
  for (const companion of companions(real)) tighten(companion, PRIVATE_FILE)
}

/** Removes from `file`'s mode every bit beyond `mode`, if it exists and this user owns it. */
function tighten(file: string, mode: number): void {
  const stats = modeOf(file)
  if (stats === undefined || !mine(stats) || (stats.mode & 0o777 & ~mode) === 0) return
  fs.chmodSync(file, stats.mode & mode)
}

/** Creates `file` empty and private, for SQLite to write a copy into; fails if it exists. */
export function createPrivateFile(file: string): void {
  fs.closeSync(fs.openSync(file, 'wx', PRIVATE_FILE))
}
