import { spawnSync } from 'node:child_process'

// A command line run as a service manager runs it: as an unprivileged user without capabilities, with
// every file system read-only but the folders it may write (systemd's ProtectSystem=strict with
// StateDirectory=, Kubernetes' readOnlyRootFilesystem), in a mount namespace of its own so that nothing
// outside the test changes. /proc and /sys stay as they are.

const SCRIPT = `set -eu
uid=$1; gid=$2; shift 2
writable=" "
while [ "$1" != "--" ]; do mount --bind "$1" "$1"; writable="$writable$1 "; shift; done
shift
for mount in $(awk '{print $5}' /proc/self/mountinfo | sort -u); do
  case "$mount" in /proc|/proc/*|/sys|/sys/*) continue ;; esac
  case "$writable" in *" $mount "*) continue ;; esac
  mount -o remount,bind,ro "$mount"
done
exec setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs -- "$@"`

/** Why sandboxes cannot be made here, or false when they can. */
export const SANDBOX_SKIP: string | false =
  process.getuid?.() !== 0
    ? 'not running as root: the sandbox (a mount namespace, then setpriv to another user) needs it'
    : spawnSync('unshare', ['--mount', '--propagation', 'private', '--', 'setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', 'true']).status !== 0
      ? 'unshare --mount or setpriv (util-linux) does not work here: the command lines are not run'
      : false

/**
 * The command line to put before a command so that it runs as `uid`:`gid`, with only `writable` (absolute
 * paths of folders) writable. It execs the command: the pid is the command's.
 */
export function sandbox({ uid, gid, writable }: { uid: number; gid: number; writable: readonly string[] }): string[] {
  return ['unshare', '--mount', '--propagation', 'private', '--', 'sh', '-c', SCRIPT, 'sandbox', String(uid), String(gid), ...writable, '--']
}
