/**
 * The "On this GPU" table's rows of one device (issue 12), sorted by
 * process, pid, bytes or state; ties keep the join's order.
 */
import {
  IGpuProcessesJoin,
  IGpuProcessRow,
  KIND_RANK
} from './gpu-process-types';
import { kernelLabel } from './kernel-labels';

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
