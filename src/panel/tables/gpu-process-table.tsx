/**
 * The "On this GPU" table: every process NVML lists on the device the panel
 * shows, with its VRAM; for a kernel of this server its notebook (a link
 * that opens it), state, idle time and Shut down kernel…; for another
 * process its name, user and command line. From the join
 * `joinGpuProcesses` (src/analysis/processes/gpu-process-join.ts)
 * computes. Pure: renders its props and reports clicks through callbacks.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';
import {
  formatBytes,
  formatIdle,
  formatPlacement
} from '../../analysis/format';
import {
  GpuProcessSortKey,
  IGpuProcessSort,
  processesOnDevice
} from '../../analysis/processes/device-processes';
import {
  IGpuProcessesJoin,
  IGpuProcessRow
} from '../../analysis/processes/gpu-process-types';
import {
  kernelName,
  kernelStateLabel
} from '../../analysis/processes/kernel-labels';
import type {
  IIdleHolding,
  ServerKernelsState
} from '../../server-kernel-types';
import { EmptyState, SortHeader } from './common';

/** Props of {@link GpuProcessesTable}. */
export interface IGpuProcessesTableProps {
  /** The join of the kernel's last `gpuProcesses`, or null (none received). */
  join: IGpuProcessesJoin | null;
  /** The device shown (`"cuda:0"`). */
  device: string;
  /** The server's kernel list, for the note when it is not available. */
  server: ServerKernelsState;
  /** The current sort. */
  sort: IGpuProcessSort;
  /** Called with the sort a header click asks for. */
  onSort: (sort: IGpuProcessSort) => void;
  /** The notebook link of a kernel was clicked (its path). */
  onOpen: (path: string) => void;
  /** "Shut down kernel…" was clicked (a kernel id of the server's answer). */
  onShutDown: (kernelId: string) => void;
  /** The tooltip of a Shut down button (its command's caption; default none). */
  shutdownCaption?: (kernelId: string) => string;
  /** Translations. */
  trans: TranslationBundle;
}

/** Why the server's kernel list is not there, or null when it is (or is being fetched). */
export function serverNote(
  server: ServerKernelsState,
  trans: TranslationBundle
): string | null {
  switch (server.status) {
    case 'missing':
      return trans.__(
        'Kernels of this server: unknown. The server does not answer gpu-hygiene/kernels (its jupyterlab_gpu_hygiene server extension is not enabled, or it is an older install). Kernels open in this browser are still recognised by the pid they report.'
      );
    case 'error':
      return trans.__(
        'The server’s kernel list could not be read (%1): kernels of this server are recognised only when they are open in this browser.',
        server.reason === 'http'
          ? trans.__('HTTP %1', server.detail)
          : server.reason === 'network'
            ? trans.__('network error: %1', server.detail)
            : trans.__('unexpected answer: %1', server.detail)
      );
    default:
      return null;
  }
}

/**
 * One `tr[data-pid][data-kind]` per process on `device`, sorted; an
 * {@link EmptyState} of kind `"no-process-list"` before the agent listed the
 * processes, `"no-processes"` when NVML lists none on the device. In a
 * container the rows carry no attribution and a note says so; a note also
 * says when the server's kernel list is missing (404) or failed.
 */
export function GpuProcessesTable(props: IGpuProcessesTableProps): JSX.Element {
  const { join, device, sort, onSort, trans } = props;
  if (!join) {
    return (
      <EmptyState kind="no-process-list">
        {trans.__(
          'NVML has not listed this GPU’s processes yet: the kernel’s agent sends the list every few seconds while NVML works (an older agent does not).'
        )}
      </EmptyState>
    );
  }
  const rows = processesOnDevice(join, device, sort);
  const note = join.attributed ? serverNote(props.server, trans) : null;
  return (
    <>
      {!join.attributed && (
        <div className="jp-GpuHygiene-note" data-note="container">
          {trans.__(
            'Attribution unavailable in this container: NVML’s pids are not this container’s, so its processes cannot be matched with kernels.'
          )}
        </div>
      )}
      {note && (
        <div className="jp-GpuHygiene-note" data-note={props.server.status}>
          {note}
        </div>
      )}
      {rows.length === 0 ? (
        <EmptyState kind="no-processes">
          {trans.__(
            'NVML lists no process on %1: this kernel has no CUDA context there, and nothing else runs on it.',
            device
          )}
        </EmptyState>
      ) : (
        <table className="jp-GpuHygiene-table jp-GpuHygiene-gpuProcesses">
          <thead>
            <tr>
              <Header column="process" sort={sort} onSort={onSort}>
                {trans.__('Process')}
              </Header>
              <Header column="pid" sort={sort} onSort={onSort}>
                {trans.__('PID')}
              </Header>
              <Header
                column="bytes"
                sort={sort}
                onSort={onSort}
                title={trans.__('Device memory of the process (NVML)')}
              >
                {trans.__('VRAM')}
              </Header>
              <Header column="state" sort={sort} onSort={onSort}>
                {trans.__('State')}
              </Header>
            </tr>
          </thead>
          <tbody>
            {rows.map(({ row, bytes }) => (
              <ProcessRow key={row.pid} {...props} row={row} bytes={bytes} />
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

/** A sort header of this table. */
function Header(props: {
  column: GpuProcessSortKey;
  sort: IGpuProcessSort;
  onSort: (sort: IGpuProcessSort) => void;
  title?: string;
  children: React.ReactNode;
}): JSX.Element {
  return <SortHeader<GpuProcessSortKey> {...props} />;
}

/** NVML's kind of process in words. */
function processKindLabel(
  kind: IGpuProcessRow['processKind'],
  trans: TranslationBundle
): string {
  switch (kind) {
    case 'compute':
      return trans.__('compute process');
    case 'graphics':
      return trans.__('graphics process');
    case 'both':
      return trans.__('compute and graphics process');
  }
}

/** One process. */
function ProcessRow(
  props: IGpuProcessesTableProps & {
    row: IGpuProcessRow;
    bytes: number | null;
  }
): JSX.Element {
  const { row, bytes, trans } = props;
  const placement = Object.keys(row.bytes).length
    ? formatPlacement(row.bytes, trans)
    : trans.__('not reported by NVML');
  return (
    <tr data-pid={row.pid} data-kind={row.kind}>
      <td className="jp-GpuHygiene-processCell">
        <ProcessCell {...props} />
      </td>
      <td className="jp-GpuHygiene-path jp-GpuHygiene-nowrap">{row.pid}</td>
      <td
        className="jp-GpuHygiene-nowrap"
        title={`${processKindLabel(row.processKind, trans)}: ${placement}`}
      >
        {bytes === null ? trans.__('n/a') : formatBytes(bytes)}
      </td>
      <td>
        <StateCell {...props} />
      </td>
    </tr>
  );
}

/** What the process is: this kernel, a kernel's notebook, or a name, user and command line. */
function ProcessCell(
  props: IGpuProcessesTableProps & { row: IGpuProcessRow }
): JSX.Element {
  const { row, trans } = props;
  const kernel = row.kernel;
  switch (row.kind) {
    case 'this-kernel':
      return (
        <span className="jp-GpuHygiene-processLabel">
          {trans.__('This kernel')}
        </span>
      );
    case 'unattributed':
      return (
        <span
          className="jp-GpuHygiene-kind"
          title={trans.__('Attribution unavailable in this container')}
        >
          {row.name ?? trans.__('unattributed')}
        </span>
      );
    case 'your-kernel':
    case 'remote-kernel': {
      const name = kernelName(kernel!, trans);
      const notebook = kernel!.notebook;
      return (
        <>
          {notebook ? (
            <button
              className="jp-GpuHygiene-link"
              data-action="open"
              title={trans.__('Open %1', notebook)}
              onClick={() => props.onOpen(notebook)}
            >
              {name}
            </button>
          ) : (
            <span className="jp-GpuHygiene-processLabel">{name}</span>
          )}
          <div className="jp-GpuHygiene-processDetail">
            <span
              className="jp-GpuHygiene-code"
              title={trans.__('Kernel id %1', kernel!.id)}
            >
              {kernel!.id.slice(0, 8)}
            </span>
            {kernel!.spec && <> · {kernel!.spec}</>}
            {row.kind === 'remote-kernel' && (
              <span
                className="jp-GpuHygiene-kind"
                title={trans.__(
                  'The server does not know this kernel’s pid (it runs behind a gateway, or the server’s kernel list is unavailable): it was recognised by the pid its own agent reported.'
                )}
              >
                {' '}
                · {trans.__('matched by its own pid')}
              </span>
            )}
          </div>
        </>
      );
    }
    case 'other-process':
      return (
        <>
          <span className="jp-GpuHygiene-code jp-GpuHygiene-processLabel">
            {row.name ?? trans.__('unknown process')}
          </span>
          {row.user !== null && (
            <span
              className="jp-GpuHygiene-kind"
              title={trans.__('Owner of the process')}
            >
              {' '}
              · {row.user}
            </span>
          )}
          {row.cmdline && (
            <div
              className="jp-GpuHygiene-cmdline jp-GpuHygiene-code"
              title={row.cmdline}
            >
              {row.cmdline}
            </div>
          )}
        </>
      );
  }
}

/**
 * The server's idle-holding threshold when `row` is a kernel past it: idle at
 * least its minutes while NVML lists at least its MiB for it (all devices);
 * else null (not past it, or a server that gives no threshold).
 */
export function idleHolding(
  server: ServerKernelsState,
  row: IGpuProcessRow
): IIdleHolding | null {
  const threshold = server.status === 'ok' ? server.answer.idleHolding : null;
  const seconds = row.kernel?.idleSeconds ?? null;
  return threshold &&
    seconds !== null &&
    seconds >= threshold.minutes * 60 &&
    row.total >= threshold.mib * 2 ** 20
    ? threshold
    : null;
}

/** A kernel's state, idle time and Shut down kernel…; nothing for other processes. */
function StateCell(
  props: IGpuProcessesTableProps & { row: IGpuProcessRow }
): JSX.Element | null {
  const { row, trans } = props;
  const kernel = row.kernel;
  if (row.kind === 'this-kernel') {
    return (
      <span className="jp-GpuHygiene-badge jp-GpuHygiene-badge-named">
        {trans.__('this notebook')}
      </span>
    );
  }
  if (!kernel) {
    return null;
  }
  const idle =
    kernel.idleSeconds === null
      ? null
      : trans.__('for %1', formatIdle(kernel.idleSeconds));
  const holding = idleHolding(props.server, row);
  return (
    <div className="jp-GpuHygiene-state">
      <span
        className={`jp-GpuHygiene-badge jp-GpuHygiene-badge-kernel-${kernel.state ?? 'unknown'}`}
        data-state={kernel.state ?? 'unknown'}
      >
        {kernelStateLabel(kernel.state, trans)}
      </span>
      {idle !== null && (
        <span
          className="jp-GpuHygiene-kind jp-GpuHygiene-idle"
          title={
            kernel.idleSource === 'cells'
              ? trans.__('Since its last cell ended')
              : trans.__(
                  'Since the server last heard from it (any message of the kernel counts)'
                )
          }
        >
          {idle}
        </span>
      )}
      {holding && (
        <span
          className="jp-GpuHygiene-badge jp-GpuHygiene-badge-idleHolding"
          data-idle-holding="true"
          title={trans.__(
            'Idle at least %1 min while holding at least %2 of VRAM: the server’s threshold (GpuHygieneMetrics.idle_minutes, idle_min_mib), which its gpu-hygiene/metrics exports for an alert or a culler',
            holding.minutes,
            formatBytes(holding.mib * 2 ** 20)
          )}
        >
          {trans.__('idle, holding VRAM')}
        </span>
      )}
      {kernel.inServer && (
        <button
          className="jp-GpuHygiene-action jp-GpuHygiene-action-delete"
          data-action="shutdown"
          title={props.shutdownCaption?.(kernel.id) || undefined}
          onClick={() => props.onShutDown(kernel.id)}
        >
          {trans.__('Shut down kernel…')}
        </button>
      )}
    </div>
  );
}
