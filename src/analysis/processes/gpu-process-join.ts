/**
 * Who else is on the GPU (issue 12): the processes NVML lists on the
 * kernel's devices (the agent's `gpuProcesses`), joined by pid with this
 * server's kernels (`GET gpu-hygiene/kernels`: the pid of each local kernel
 * process) and with the `hello.pid` of the other kernels the browser has
 * agents in (kernels behind a Kernel Gateway, whose pid the server does not
 * know). Pure functions of those facts.
 *
 * A process is this kernel, a kernel of the user on this server (with its
 * notebook, state and idle time), a kernel matched only by the pid it
 * reports itself (`remote-kernel`: the server sees no pid for it), or
 * another process (its name and user). Where NVML's pids are not this OS's
 * pids (`namespace: "container"`) nothing is joined: the rows carry no
 * attribution.
 */
import type { IGpuProcess, IGpuProcesses } from '../../protocol';
import type {
  IServerKernel,
  IServerKernelsAnswer
} from '../../server-kernel-types';
import {
  GpuProcessKind,
  IDeviceTotals,
  IGpuProcessesJoin,
  IGpuProcessRow,
  IKernelInfo,
  IKnownKernel,
  KIND_RANK
} from './gpu-process-types';
import { notebookOf } from './kernel-labels';

/** What {@link joinGpuProcesses} is given. */
export interface IJoinInput {
  /** The agent's last `gpuProcesses` message. */
  processes: IGpuProcesses;
  /** The kernel whose agent sent it. */
  kernelId: string;
  /** The server's kernel list, or null (not fetched, 404, error). */
  server: IServerKernelsAnswer | null;
  /** The other kernels the browser has agents in (this one may be included: it is skipped). */
  known: ReadonlyArray<IKnownKernel>;
  /** Now, ms since the epoch (idle times). */
  now: number;
}

/** The device key of a CUDA index, as in the inventory's bytes (`"cuda:0"`). */
export function deviceKey(index: number): string {
  return `cuda:${index}`;
}

/** Seconds since an ISO 8601 time, or null when it does not parse or lies ahead. */
function secondsSince(iso: string | null, now: number): number | null {
  if (!iso) {
    return null;
  }
  const at = Date.parse(iso);
  if (!Number.isFinite(at) || at > now + 1000) {
    return null;
  }
  return Math.max(0, (now - at) / 1000);
}

/**
 * The kernel behind a pid, if it is one of the user's: the server kernel
 * with that pid, else a kernel the browser knows that reported it (its
 * server entry then gives the notebook and state, when listed).
 *
 * Idle time: the browser's record of a kernel's cells where it has one (the
 * server's last activity counts every message, the agent's samples too), else
 * the server's last activity.
 */
export function kernelOfPid(
  pid: number,
  server: IServerKernelsAnswer | null,
  known: ReadonlyArray<IKnownKernel>,
  now: number
): IKernelInfo | null {
  const byServer = server?.kernels.find(k => k.pid === pid) ?? null;
  const browser = byServer
    ? (known.find(k => k.id === byServer.id) ?? null)
    : (known.find(k => k.pid === pid) ?? null);
  if (!byServer && !browser) {
    return null;
  }
  const entry: IServerKernel | null =
    byServer ?? server?.kernels.find(k => k.id === browser!.id) ?? null;
  const id = entry?.id ?? browser!.id;
  const state = entry?.executionState ?? browser?.status ?? null;
  let idleSeconds: number | null = null;
  let idleSource: IKernelInfo['idleSource'] = null;
  if (state === 'idle') {
    if (browser?.idleSince !== null && browser?.idleSince !== undefined) {
      idleSeconds = Math.max(0, now / 1000 - browser.idleSince);
      idleSource = 'cells';
    } else {
      idleSeconds = secondsSince(entry?.lastActivity ?? null, now);
      idleSource = idleSeconds === null ? null : 'server';
    }
  }
  const sessions = entry?.sessions ?? [];
  return {
    id,
    spec: entry?.name ?? null,
    notebook: notebookOf(sessions, browser?.path ?? null),
    sessions,
    state,
    idleSeconds,
    idleSource,
    connections: entry?.connections ?? null,
    inServer: entry !== null,
    matchedBy: byServer ? 'server' : 'hello'
  };
}

/** Merge two NVML kinds of one pid: compute + graphics is both. */
function mergeKind(
  a: IGpuProcess['kind'],
  b: IGpuProcess['kind']
): IGpuProcess['kind'] {
  return a === b ? a : 'both';
}

function emptyTotals(): IDeviceTotals {
  return {
    otherBytes: 0,
    otherCount: 0,
    kernelBytes: 0,
    kernelCount: 0,
    unattributedBytes: 0,
    unattributedCount: 0
  };
}

/**
 * The processes NVML lists on one device, one per pid: a pid listed twice
 * (once as a compute, once as a graphics process) is one process of kind
 * `both`, its bytes counted once (NVML gives the same figure in both lists).
 */
function devicePids(
  listed: ReadonlyArray<IGpuProcess>
): IterableIterator<IGpuProcess> {
  const seen = new Map<number, IGpuProcess>();
  for (const p of listed) {
    const before = seen.get(p.pid);
    seen.set(
      p.pid,
      before
        ? {
            ...before,
            kind: mergeKind(before.kind, p.kind),
            used:
              before.used === null
                ? p.used
                : p.used === null
                  ? before.used
                  : Math.max(before.used, p.used),
            self: before.self || p.self
          }
        : p
    );
  }
  return seen.values();
}

/** What the join knows besides the processes: whether pids are attributed, the server's and the browser's kernels. */
interface IJoinContext {
  /** The message's own pid (this kernel). */
  pid: IGpuProcesses['pid'];
  attributed: boolean;
  server: IServerKernelsAnswer | null;
  /** The browser's other kernels (this one left out). */
  known: ReadonlyArray<IKnownKernel>;
  now: number;
}

/**
 * What a process is: this kernel (`self`), unattributed (container),
 * another process, a kernel whose pid only its agent reported (the server
 * lists no pid for it: remote), or one of the user's kernels.
 */
function rowKind(
  self: boolean,
  kernel: IKernelInfo | null,
  ctx: IJoinContext
): GpuProcessKind {
  if (self) {
    return 'this-kernel';
  }
  if (!ctx.attributed) {
    return 'unattributed';
  }
  if (kernel === null) {
    return 'other-process';
  }
  return kernel.matchedBy === 'hello' &&
    !(
      ctx.server?.kernels.some(k => k.id === kernel.id && k.pid !== null) ??
      false
    )
    ? 'remote-kernel'
    : 'your-kernel';
}

/** The row of a pid first seen as `p` (no bytes yet). */
function newRow(p: IGpuProcess, ctx: IJoinContext): IGpuProcessRow {
  const self = p.self || (ctx.attributed && p.pid === ctx.pid);
  const kernel =
    !self && ctx.attributed
      ? kernelOfPid(p.pid, ctx.server, ctx.known, ctx.now)
      : null;
  return {
    pid: p.pid,
    kind: rowKind(self, kernel, ctx),
    bytes: {},
    unknown: [],
    total: 0,
    processKind: p.kind,
    name: p.name,
    cmdline: p.cmdline,
    user: p.user,
    kernel
  };
}

/** Add `p`, listed on the device `key`, to its row: its kind, details where the row lacks them, its bytes. */
function addToRow(
  row: IGpuProcessRow,
  p: IGpuProcess,
  key: string,
  first: boolean
): void {
  if (!first) {
    row.processKind = mergeKind(row.processKind, p.kind);
    row.name ??= p.name;
    row.cmdline ??= p.cmdline;
    row.user ??= p.user;
  }
  if (p.used === null) {
    row.unknown.push(key);
  } else {
    row.bytes[key] = (row.bytes[key] ?? 0) + p.used;
    row.total += p.used;
  }
}

/** Count `used` bytes of a process of kind `kind` in a device's totals. */
function addToTotals(
  t: IDeviceTotals,
  kind: GpuProcessKind,
  used: number
): void {
  switch (kind) {
    case 'other-process':
      t.otherBytes += used;
      t.otherCount++;
      break;
    case 'your-kernel':
    case 'remote-kernel':
      t.kernelBytes += used;
      t.kernelCount++;
      break;
    case 'unattributed':
      t.unattributedBytes += used;
      t.unattributedCount++;
      break;
  }
}

/**
 * Join one `gpuProcesses` message with the server's kernels and the kernels
 * the browser knows.
 *
 * A pid listed twice on one device (once as a compute, once as a graphics
 * process) is one process of kind `both`, its bytes counted once (NVML gives
 * the same figure in both lists). A pid on several devices is one row with
 * bytes per device. `self` (or the message's own `pid`) is this kernel. In a
 * container (`namespace: "container"`) only `self` is said; every other
 * row is `unattributed`.
 */
export function joinGpuProcesses(input: IJoinInput): IGpuProcessesJoin {
  const { processes, kernelId, server, now } = input;
  const ctx: IJoinContext = {
    pid: processes.pid,
    attributed: processes.namespace !== 'container',
    server,
    known: input.known.filter(k => k.id !== kernelId),
    now
  };
  const rows = new Map<number, IGpuProcessRow>();
  const totals: Record<string, IDeviceTotals> = {};
  for (const device of processes.devices) {
    const key = deviceKey(device.index);
    totals[key] ??= emptyTotals();
    for (const p of devicePids(device.processes)) {
      const known = rows.get(p.pid);
      const row = known ?? newRow(p, ctx);
      rows.set(p.pid, row);
      addToRow(row, p, key, !known);
      addToTotals(totals[key], row.kind, p.used ?? 0);
    }
  }
  return {
    t: processes.t,
    namespace: processes.namespace,
    attributed: ctx.attributed,
    server: server !== null,
    rows: [...rows.values()].sort(
      (a, b) =>
        b.total - a.total ||
        KIND_RANK[a.kind] - KIND_RANK[b.kind] ||
        a.pid - b.pid
    ),
    totals
  };
}
