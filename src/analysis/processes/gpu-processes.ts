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
import type { TranslationBundle } from '@jupyterlab/translation';
import type { IGpuProcesses, IGpuProcess, IOom } from '../../protocol';
import type {
  IServerKernel,
  IServerKernelsAnswer,
  IServerSession
} from '../../serverkernels';

/** What a process on the GPU is, for the user. */
export type GpuProcessKind =
  | 'this-kernel' // the kernel whose agent sent the list
  | 'your-kernel' // another kernel of this server, matched by pid
  | 'remote-kernel' // a kernel matched by the pid it reports (hello.pid); the server knows no pid for it
  | 'other-process' // not a kernel the browser or the server knows
  | 'unattributed'; // NVML's pids are not this OS's (container): nothing is said

/** A kernel the browser has an agent in (one model of the monitor). */
export interface IKnownKernel {
  /** Kernel id. */
  id: string;
  /** The pid its agent reported (`hello.pid`). */
  pid: number;
  /** Path of the notebook the browser has open on it, or null. */
  path: string | null;
  /** The kernel's status as the browser sees it (`idle`, `busy`, ...), or null. */
  status: string | null;
  /**
   * When its last cell ended (or its agent started, when no cell ran since),
   * seconds since the epoch; null when unknown.
   */
  idleSince: number | null;
}

/** The kernel behind a process row. */
export interface IKernelInfo {
  /** Kernel id (as `/api/kernels`). */
  id: string;
  /** Kernelspec name (`python3`), or null when the server did not list the kernel. */
  spec: string | null;
  /** Path of its notebook (the first notebook session, else the browser's), or null. */
  notebook: string | null;
  /** Its sessions, as the server lists them (empty when it did not). */
  sessions: ReadonlyArray<IServerSession>;
  /** Execution state (`idle`, `busy`, `starting`, ...), or null when unknown. */
  state: string | null;
  /** Seconds since it became idle (null unless `state` is `idle` and the time is known). */
  idleSeconds: number | null;
  /** Where `idleSeconds` comes from: the browser's record of its cells, or the server's last activity. */
  idleSource: 'cells' | 'server' | null;
  /** Websocket connections the server counts, or null. */
  connections: number | null;
  /**
   * Listed in the server's answer: only then can it be shut down from here
   * (JupyterLab's kernel manager, by this id).
   */
  inServer: boolean;
  /** How the pid was matched: the server's pid of the kernel process, or the pid the kernel reported. */
  matchedBy: 'server' | 'hello';
}

/** One process on the kernel's GPUs, all devices together. */
export interface IGpuProcessRow {
  /** The pid as NVML lists it. */
  pid: number;
  /** What it is. */
  kind: GpuProcessKind;
  /** NVML's used bytes per device (`"cuda:<index>"`), where reported. */
  bytes: Record<string, number>;
  /** Devices where NVML lists it without a figure (`used: null`). */
  unknown: string[];
  /** Sum of `bytes`. */
  total: number;
  /** Compute, graphics or both (over all its devices). */
  processKind: IGpuProcess['kind'];
  /** Process name, command line and owner (null when unreadable). */
  name: string | null;
  cmdline: string | null;
  user: string | null;
  /** The kernel, for `your-kernel`, `remote-kernel` and (when known) `this-kernel`. */
  kernel: IKernelInfo | null;
}

/** Totals of one device, for the gauge's tooltip. */
export interface IDeviceTotals {
  /** Bytes and count of processes that are not the user's kernels (`other-process`). */
  otherBytes: number;
  otherCount: number;
  /** Bytes and count of the user's other kernels (`your-kernel`, `remote-kernel`). */
  kernelBytes: number;
  kernelCount: number;
  /** Bytes and count of processes not attributed (container). */
  unattributedBytes: number;
  unattributedCount: number;
}

/** The join of one `gpuProcesses` message. */
export interface IGpuProcessesJoin {
  /** When the agent listed them, seconds since the epoch. */
  t: number;
  /** The message's pid namespace. */
  namespace: IGpuProcesses['namespace'];
  /** Whether the rows are attributed (false in a container: the pids are not this OS's). */
  attributed: boolean;
  /** Whether the server's kernel list was available for the join. */
  server: boolean;
  /** The processes, largest first (this kernel first among equals). */
  rows: IGpuProcessRow[];
  /** Totals per device (`"cuda:<index>"`), every device of the message. */
  totals: Record<string, IDeviceTotals>;
}

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

/** Order of the kinds among rows of equal size. */
const KIND_RANK: Record<GpuProcessKind, number> = {
  'this-kernel': 0,
  'your-kernel': 1,
  'remote-kernel': 2,
  'other-process': 3,
  unattributed: 4
};

/** The device key of a CUDA index, as in the inventory's bytes (`"cuda:0"`). */
export function deviceKey(index: number): string {
  return `cuda:${index}`;
}

/** The last path segment: `work/a.ipynb` → `a.ipynb`. */
export function baseName(path: string): string {
  const parts = path.split('/').filter(Boolean);
  return parts.length ? parts[parts.length - 1] : path;
}

/**
 * The kernel's notebook: the path of its first `notebook` session, else the
 * notebook the browser has open on it, else null.
 */
export function notebookOf(
  sessions: ReadonlyArray<IServerSession>,
  browserPath: string | null
): string | null {
  const notebook = sessions.find(s => s.type === 'notebook' && s.path);
  return notebook?.path ?? browserPath ?? null;
}

/**
 * A short, untranslated label of a kernel: its notebook's file name, else
 * its first session's name or path, else null (the view then says "kernel
 * <id>").
 */
export function kernelLabel(kernel: IKernelInfo): string | null {
  if (kernel.notebook) {
    return baseName(kernel.notebook);
  }
  const first = kernel.sessions[0];
  return first ? first.name || first.path || null : null;
}

/** A kernel's execution state in words. */
export function kernelStateLabel(
  state: string | null,
  trans: TranslationBundle
): string {
  switch (state) {
    case 'idle':
      return trans.__('idle');
    case 'busy':
      return trans.__('busy');
    case 'starting':
      return trans.__('starting');
    case 'restarting':
    case 'autorestarting':
      return trans.__('restarting');
    case 'dead':
      return trans.__('dead');
    case null:
    case 'unknown':
      return trans.__('state unknown');
    default:
      return state;
  }
}

/** A kernel's name for the user: its notebook's file name, else `kernel 1a2b3c4d`. */
export function kernelName(
  kernel: IKernelInfo,
  trans: TranslationBundle
): string {
  return kernelLabel(kernel) ?? trans.__('kernel %1', kernel.id.slice(0, 8));
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

/** A process on one device: its row and its bytes there (null: NVML did not say). */
export interface IDeviceProcess {
  row: IGpuProcessRow;
  bytes: number | null;
}

/** Columns the "On this GPU" table sorts by. */
export type GpuProcessSortKey = 'process' | 'pid' | 'bytes' | 'state';

/** A sort of the "On this GPU" table. */
export interface IGpuProcessSort {
  key: GpuProcessSortKey;
  direction: 'asc' | 'desc';
}

/** The table's first sort: largest first. */
export const DEFAULT_GPU_PROCESS_SORT: IGpuProcessSort = {
  key: 'bytes',
  direction: 'desc'
};

/** The text a row is sorted by in the process column. */
function processText(row: IGpuProcessRow): string {
  if (row.kernel) {
    return (kernelLabel(row.kernel) ?? row.kernel.id).toLowerCase();
  }
  return (row.name ?? '').toLowerCase();
}

/** The rank a row is sorted by in the state column: this kernel, idle kernels (longest idle first), busy kernels, others. */
function stateRank(row: IGpuProcessRow): [number, number] {
  if (row.kind === 'this-kernel') {
    return [0, 0];
  }
  if (row.kernel) {
    return row.kernel.state === 'idle'
      ? [1, -(row.kernel.idleSeconds ?? 0)]
      : [2, 0];
  }
  return [KIND_RANK[row.kind], 0];
}

/**
 * The processes on one device (`"cuda:<index>"`), sorted. Ties keep the
 * join's order (largest first).
 */
export function processesOnDevice(
  join: IGpuProcessesJoin,
  device: string,
  sort: IGpuProcessSort = DEFAULT_GPU_PROCESS_SORT
): IDeviceProcess[] {
  const rows = join.rows
    .filter(r => device in r.bytes || r.unknown.includes(device))
    .map(row => ({ row, bytes: row.bytes[device] ?? null }));
  const sign = sort.direction === 'asc' ? 1 : -1;
  const compare = (a: IDeviceProcess, b: IDeviceProcess): number => {
    switch (sort.key) {
      case 'bytes':
        return (a.bytes ?? -1) - (b.bytes ?? -1);
      case 'pid':
        return a.row.pid - b.row.pid;
      case 'process':
        return processText(a.row).localeCompare(processText(b.row));
      case 'state': {
        const [ra, sa] = stateRank(a.row);
        const [rb, sb] = stateRank(b.row);
        return ra - rb || sa - sb;
      }
    }
  };
  return rows
    .map((entry, i) => ({ entry, i }))
    .sort((a, b) => sign * compare(a.entry, b.entry) || a.i - b.i)
    .map(({ entry }) => entry);
}

/** One of the user's idle kernels that held memory on the device of an OOM. */
export interface IOomKernel {
  /** The kernel. */
  kernel: IKernelInfo;
  /** The pid NVML listed. */
  pid: number;
  /** Its bytes on the failed device (NVML; null when not reported). */
  bytes: number | null;
}

/** What the user's own idle kernels held on the device of a CUDA out-of-memory error. */
export interface IOomKernels {
  /** The idle kernels, largest first. */
  kernels: IOomKernel[];
  /** Their bytes together. */
  bytes: number;
  /** Bytes in use on the device when the cell failed (`total − free`, else the listed processes and this kernel). */
  inUse: number;
  /** Whether they held most of it (at least half). */
  mostly: boolean;
}

/**
 * The user's own idle kernels among the other processes of an `oom`
 * message (`processes`, NVML on the failed device), joined by pid like
 * {@link joinGpuProcesses}; null when there is none, or when the pids cannot
 * be joined (`namespace` `container`, from the kernel's last `gpuProcesses`).
 * "Mostly": together they held at least half of what was in use on the
 * device.
 */
export function oomIdleKernels(
  oom: IOom,
  context: {
    namespace: IGpuProcesses['namespace'] | null;
    kernelId: string;
    server: IServerKernelsAnswer | null;
    known: ReadonlyArray<IKnownKernel>;
    now: number;
  }
): IOomKernels | null {
  if (context.namespace === 'container') {
    return null;
  }
  const known = context.known.filter(k => k.id !== context.kernelId);
  const kernels: IOomKernel[] = [];
  for (const p of oom.processes) {
    const kernel = kernelOfPid(p.pid, context.server, known, context.now);
    if (
      kernel &&
      kernel.id !== context.kernelId &&
      kernel.state === 'idle' &&
      !kernels.some(k => k.kernel.id === kernel.id)
    ) {
      kernels.push({ kernel, pid: p.pid, bytes: p.used });
    }
  }
  if (!kernels.length) {
    return null;
  }
  kernels.sort((a, b) => (b.bytes ?? 0) - (a.bytes ?? 0));
  const bytes = kernels.reduce((sum, k) => sum + (k.bytes ?? 0), 0);
  const listed =
    oom.processes.reduce((sum, p) => sum + (p.used ?? 0), 0) +
    (oom.process ?? 0);
  const inUse =
    oom.total !== null && oom.free !== null
      ? Math.max(0, oom.total - oom.free)
      : listed;
  return { kernels, bytes, inUse, mostly: bytes > 0 && 2 * bytes >= inUse };
}
