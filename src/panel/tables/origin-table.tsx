/**
 * "Live CUDA memory by origin" (issue 24): the toggle that records
 * allocation stacks (the `recordOrigins` setting) with what recording costs,
 * and, while it records, the live blocks grouped by the notebook cell and
 * line that allocated them, each cell a link to that cell. Pure: renders its
 * props (`originsView` of src/analysis/memory/origins.ts).
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';
import { formatBytes } from '../../analysis/format';
import {
  type IRecordingCost,
  type IOriginRow,
  type OriginsView
} from '../../analysis/memory/origins';
import { EmptyState } from './common';

/** A link to an origin was clicked: its execution count, line and the cell's id if known. */
export type OnGo = (
  cell: number,
  line: number | null,
  cellId: string | null
) => void;

/** "cell [7] line 12", or a file's "train.py:40" for an origin outside the notebook. */
export function originLabel(
  row: Pick<IOriginRow, 'cell' | 'line' | 'file'>,
  trans: TranslationBundle
): string {
  if (row.cell !== null) {
    return row.line !== null
      ? trans.__('cell [%1] line %2', row.cell, row.line)
      : trans.__('cell [%1]', row.cell);
  }
  const file = (row.file ?? '').split(/[\\/]/).pop() ?? '';
  return row.line !== null ? `${file}:${row.line}` : file;
}

/** A link to the cell an origin names (a button: the cell is in this notebook). */
export function OriginLink(props: {
  row: Pick<IOriginRow, 'cell' | 'line' | 'file' | 'cellId'>;
  onGo: OnGo;
  trans: TranslationBundle;
}): JSX.Element {
  const { row, trans } = props;
  const label = originLabel(row, trans);
  if (row.cell === null) {
    return (
      <span className="jp-GpuHygiene-path" title={row.file ?? ''}>
        {label}
      </span>
    );
  }
  const cell = row.cell;
  return (
    <button
      type="button"
      className="jp-GpuHygiene-link"
      data-action="go-to-origin"
      data-cell={cell}
      title={trans.__('Select cell [%1] in the notebook', cell)}
      onClick={() => props.onGo(cell, row.line, row.cellId)}
    >
      {label}
    </button>
  );
}

/** The toggle and, under it, what recording costs (measured). */
function RecordToggle(props: {
  on: boolean;
  onToggle: (on: boolean) => void;
  cost?: IRecordingCost;
  /** What reading the origins cost this kernel after its last cell, ms (the agent's figure). */
  readMs: number | null;
  trans: TranslationBundle;
}): JSX.Element {
  const { cost, trans } = props;
  return (
    <div className="jp-GpuHygiene-originsTools">
      <label>
        <input
          type="checkbox"
          data-action="record-origins"
          checked={props.on}
          onChange={event => props.onToggle(event.target.checked)}
        />{' '}
        {trans.__('Record which cell allocated live CUDA memory')}
      </label>
      {props.readMs !== null && (
        <span className="jp-GpuHygiene-originsCost" data-cost="read">
          {trans.__(
            'reading them took %1 ms after the last cell',
            props.readMs.toFixed(1)
          )}
        </span>
      )}
      {cost && (
        <span className="jp-GpuHygiene-originsCost" data-cost="bench">
          {trans.__(
            'Costs each CUDA allocation about %1 µs; a training step took %2× as long (%3).',
            cost.allocUs.toFixed(1),
            cost.stepRatio.toFixed(2),
            cost.where
          )}
        </span>
      )}
    </div>
  );
}

/**
 * The section: heading, toggle, then the state: off (what it would show),
 * waiting for the kernel's first CUDA use, unsupported by its torch, or the
 * table (`tr[data-origin]`: origin link, source line, bytes, blocks) with
 * what the figures leave out. `device` is the device shown (`cuda:N`).
 */
export function OriginsSection(props: {
  view: OriginsView;
  on: boolean;
  device: string;
  onToggle: (on: boolean) => void;
  onGo: OnGo;
  cost?: IRecordingCost;
  trans: TranslationBundle;
}): JSX.Element {
  const { view, trans } = props;
  return (
    <div className="jp-GpuHygiene-origins" data-state={view.state}>
      <h3 className="jp-GpuHygiene-heading">
        {trans.__('Live CUDA memory by origin')}
      </h3>
      <RecordToggle
        on={props.on}
        onToggle={props.onToggle}
        cost={props.cost}
        readMs={view.state === 'recording' ? view.costMs : null}
        trans={trans}
      />
      {view.state === 'off' ? (
        props.on ? (
          <EmptyState kind="origins-pending">
            {trans.__('Asking the kernel to record… (after the next cell)')}
          </EmptyState>
        ) : null
      ) : view.state === 'waiting' ? (
        <EmptyState kind="origins-waiting">
          {view.reason === 'torch'
            ? trans.__(
                'Recording starts once this kernel has imported torch and used CUDA.'
              )
            : trans.__(
                'Recording starts after this kernel’s first cell that uses CUDA.'
              )}
        </EmptyState>
      ) : view.state === 'unsupported' ? (
        <EmptyState kind="origins-unsupported">
          {trans.__(
            'This kernel’s torch did not record allocation stacks: %1',
            view.error ??
              trans.__(
                'it has no torch.cuda.memory._record_memory_history (torch 2.1 or later has)'
              )
          )}
        </EmptyState>
      ) : (
        <OriginsTable
          view={view}
          device={props.device}
          onGo={props.onGo}
          trans={trans}
        />
      )}
    </div>
  );
}

function OriginsTable(props: {
  view: Extract<OriginsView, { state: 'recording' }>;
  device: string;
  onGo: OnGo;
  trans: TranslationBundle;
}): JSX.Element {
  const { view, trans } = props;
  return (
    <>
      {view.rows.length === 0 && view.skipped === 0 && view.truncated === 0 ? (
        <EmptyState kind="origins-none">
          {trans.__(
            'No live CUDA block was allocated while recording on %1.',
            props.device
          )}
        </EmptyState>
      ) : view.rows.length === 0 ? null : (
        <table className="jp-GpuHygiene-table jp-GpuHygiene-originTable">
          <thead>
            <tr>
              <th scope="col">{trans.__('Origin')}</th>
              <th scope="col">{trans.__('Code')}</th>
              <th scope="col">{trans.__('Live')}</th>
              <th scope="col" title={trans.__('Live allocator blocks')}>
                {trans.__('Blocks')}
              </th>
            </tr>
          </thead>
          <tbody>
            {view.rows.map(row => (
              <tr key={row.key} data-origin={originLabel(row, trans)}>
                <td className="jp-GpuHygiene-nowrap">
                  <OriginLink row={row} onGo={props.onGo} trans={trans} />
                  {row.via && (
                    <span className="jp-GpuHygiene-muted">
                      {' '}
                      {trans.__(
                        'run by %1',
                        originLabel({ ...row.via, file: null }, trans)
                      )}
                    </span>
                  )}
                  {row.sameCode.length > 0 && (
                    <span
                      className="jp-GpuHygiene-muted"
                      title={trans.__(
                        'These cells ran the very same code; the kernel cannot tell which of them allocated these blocks'
                      )}
                    >
                      {' '}
                      {trans.__(
                        'or [%1]: same code',
                        row.sameCode.join('], [')
                      )}
                    </span>
                  )}
                </td>
                <td
                  className="jp-GpuHygiene-originCode"
                  title={row.text ?? row.name}
                >
                  <code>{row.text ?? row.name}</code>
                </td>
                <td className="jp-GpuHygiene-nowrap">
                  {formatBytes(row.bytes)}
                </td>
                <td className="jp-GpuHygiene-nowrap">{row.blocks}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <div className="jp-GpuHygiene-muted jp-GpuHygiene-originsNote">
        {[
          trans.__('%1 live on all devices', formatBytes(view.liveBytes)),
          view.byUser
            ? trans.__('recording started by your code, read only')
            : null,
          view.stopped
            ? view.stopped.cell !== null
              ? trans.__(
                  'your code turned recording off (seen after cell [%1]): later blocks have no origin; turn recording off and on to record again',
                  view.stopped.cell
                )
              : trans.__(
                  'your code turned recording off: later blocks have no origin; turn recording off and on to record again'
                )
            : null,
          view.error ? trans.__('this read failed: %1', view.error) : null,
          view.untracedBytes > 0
            ? view.since !== null && !view.stopped
              ? trans.__(
                  '%1 allocated before cell [%2] or off the Python stack',
                  formatBytes(view.untracedBytes),
                  view.since
                )
              : trans.__(
                  '%1 with no recorded stack',
                  formatBytes(view.untracedBytes)
                )
            : null,
          view.skipped > 0
            ? trans.__(
                '%1 blocks (%2) not read: over the bound',
                view.skipped,
                formatBytes(view.skippedBytes)
              )
            : null,
          view.truncated > 0
            ? trans._n(
                '%1 smaller origin left out',
                '%1 smaller origins left out',
                view.truncated
              )
            : null
        ]
          .filter(Boolean)
          .join(' · ')}
      </div>
    </>
  );
}
