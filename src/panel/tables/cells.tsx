/**
 * The per-cell table: one row per execution with its duration, PyTorch's
 * allocated delta and peak (GPU kernels only) and the models the cell
 * created, from the rows `cellRows` (src/analysis/cells.ts) computes. Pure:
 * renders its props.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';
import type { ICellRow } from '../../analysis/cells';
import {
  formatBytes,
  formatDelta,
  formatDuration
} from '../../analysis/format';
import { EmptyState } from './common';

/**
 * Per-cell table: newest first, at most `max` rows, one
 * `tr[data-execution-count]` per execution; an {@link EmptyState} of kind
 * `"no-cells"` before the first cell. The allocation columns (Δ allocated,
 * peak: PyTorch's caching allocator) are shown only when `gpu` is true.
 */
export function CellTable(props: {
  /** The cells, oldest first, as `cellRows` returns them. */
  cells: ReadonlyArray<ICellRow>;
  /** Whether the kernel sees a GPU (shows the allocation columns). */
  gpu: boolean;
  /** Translations. */
  trans: TranslationBundle;
  /** Most rows shown (default 50). */
  max?: number;
}): JSX.Element {
  const { cells, gpu, trans } = props;
  if (!cells.length) {
    return (
      <EmptyState kind="no-cells">
        {trans.__(
          'No cell has run since the agent started. Run a cell: each execution adds a row with its duration, allocation and the models it created.'
        )}
      </EmptyState>
    );
  }
  const rows = cells.slice(-(props.max ?? 50)).reverse();
  return (
    <table className="jp-GpuHygiene-table jp-GpuHygiene-cells">
      <thead>
        <tr>
          <th scope="col">{trans.__('Cell')}</th>
          <th scope="col">{trans.__('Duration')}</th>
          {gpu && (
            <th
              scope="col"
              title={trans.__('PyTorch allocated after the cell minus before')}
            >
              {trans.__('Δ allocated')}
            </th>
          )}
          {gpu && (
            <th
              scope="col"
              title={trans.__(
                'Highest PyTorch allocated among the samples taken while the cell ran'
              )}
            >
              {trans.__('Peak')}
            </th>
          )}
          <th
            scope="col"
            title={trans.__(
              'Models alive after the cell that were not alive before it'
            )}
          >
            {trans.__('New models')}
          </th>
        </tr>
      </thead>
      <tbody>
        {rows.map(row => (
          <tr
            key={`${row.executionCount}-${row.end}`}
            data-execution-count={row.executionCount}
          >
            <td>[{row.executionCount}]</td>
            <td
              className="jp-GpuHygiene-nowrap"
              title={
                row.durationMs === null
                  ? trans.__('Shorter than the sample interval')
                  : undefined
              }
            >
              {formatDuration(row.durationMs)}
            </td>
            {gpu && (
              <td
                className={`jp-GpuHygiene-nowrap${
                  row.delta !== null && row.delta > 0
                    ? ' jp-GpuHygiene-up'
                    : row.delta !== null && row.delta < 0
                      ? ' jp-GpuHygiene-down'
                      : ''
                }`}
              >
                {formatDelta(row.delta)}
              </td>
            )}
            {gpu && (
              <td className="jp-GpuHygiene-nowrap">{formatBytes(row.peak)}</td>
            )}
            <td title={row.created?.map(m => m.label).join('\n') ?? undefined}>
              {row.created === null
                ? '?'
                : row.created.length
                  ? row.created.map(m => m.label).join(', ')
                  : '—'}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
