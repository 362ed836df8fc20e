/**
 * The per-cell table: one row per execution with its duration, PyTorch's
 * allocated delta and peak (GPU kernels only) and the models the cell created,
 * from the rows `cellRows` (src/analysis/cells/cell-history.ts) computes; under
 * a cell that trained an Ultralytics model, a line with its epochs and the peak
 * per epoch (`cellEpochs`, src/analysis/cells/epochs.ts). Pure: renders its
 * props.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';
import type { ICellRow } from '../../analysis/cells/cell-history';
import {
  ICellEpochs,
  IEpochPeak,
  ITrainingEpochs,
  sawAllEpochs
} from '../../analysis/cells/epochs';
import {
  formatBytes,
  formatDelta,
  formatDuration
} from '../../analysis/format';
import { EmptyState } from './common';

/** Epochs listed one by one on the line; beyond, the first and last three (all in its title). */
const MAX_LISTED_EPOCHS = 8;

function epochLabel(
  training: ITrainingEpochs,
  trans: TranslationBundle
): string {
  const { peaks, epochs } = training;
  if (sawAllEpochs(training)) {
    return trans._n('%1 epoch', '%1 epochs', epochs);
  }
  const first = peaks[0].epoch + 1;
  const last = peaks[peaks.length - 1].epoch + 1;
  return first === last
    ? trans.__('epoch %1 of %2', first, epochs)
    : trans.__('epochs %1–%2 of %3', first, last, epochs);
}

function peakList(peaks: ReadonlyArray<IEpochPeak>): string {
  const item = (p: IEpochPeak) => `${p.epoch + 1}: ${formatBytes(p.allocated)}`;
  if (peaks.length <= MAX_LISTED_EPOCHS) {
    return peaks.map(item).join(', ');
  }
  return [
    ...peaks.slice(0, 3).map(item),
    '…',
    ...peaks.slice(-3).map(item)
  ].join(', ');
}

/**
 * The line under a training cell: `"3 epochs, peak per epoch: 1: 812.0 MiB,
 * 2: 830.0 MiB, 3: 830.0 MiB"` (peaks: PyTorch allocated, only with `gpu`);
 * its title lists every epoch seen with its allocated and reserved peaks.
 */
function EpochsLine(props: {
  epochs: ICellEpochs;
  executionCount: number;
  columns: number;
  gpu: boolean;
  trans: TranslationBundle;
}): JSX.Element {
  const { epochs, gpu, trans } = props;
  const parts = epochs.trainings.map(training => {
    const label = epochLabel(training, trans);
    const measured = gpu && training.peaks.some(p => p.allocated !== null);
    return measured
      ? trans.__('%1, peak per epoch: %2', label, peakList(training.peaks))
      : label;
  });
  const title = epochs.trainings
    .flatMap(training => training.peaks)
    .map(p =>
      gpu
        ? trans._n(
            'Epoch %2: peak allocated %3, reserved %4 (%1 sample)',
            'Epoch %2: peak allocated %3, reserved %4 (%1 samples)',
            p.samples,
            p.epoch + 1,
            formatBytes(p.allocated),
            formatBytes(p.reserved)
          )
        : trans._n(
            'Epoch %2 (%1 sample)',
            'Epoch %2 (%1 samples)',
            p.samples,
            p.epoch + 1
          )
    )
    .join('\n');
  return (
    <tr className="jp-GpuHygiene-epochs" data-epochs-of={props.executionCount}>
      <td />
      <td colSpan={props.columns - 1} title={title}>
        {trans.__('Training: %1', parts.join('; '))}
      </td>
    </tr>
  );
}

/**
 * Per-cell table: newest first, at most `max` rows, one
 * `tr[data-execution-count]` per execution; an {@link EmptyState} of kind
 * `"no-cells"` before the first cell. The allocation columns (Δ allocated,
 * peak: PyTorch's caching allocator) are shown only when `gpu` is true. A
 * cell that trained an Ultralytics model gets a `tr.jp-GpuHygiene-epochs`
 * line under its row (`data-epochs-of`: its execution count).
 */
export function CellTable(props: {
  /** The cells, oldest first, as `cellRows` returns them. */
  cells: ReadonlyArray<ICellRow>;
  /** The epochs of each cell, in the order of `cells` (`epochsByCell`); absent: none shown. */
  epochs?: ReadonlyArray<ICellEpochs | null>;
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
        {gpu
          ? trans.__(
              'No cell has run since the agent started. Run a cell: each execution adds a row with its duration, allocation and the models it created.'
            )
          : trans.__(
              'No cell has run since the agent started. Run a cell: each execution adds a row with its duration and the models it created.'
            )}
      </EmptyState>
    );
  }
  const rows = cells
    .map((row, i) => ({ row, epochs: props.epochs?.[i] ?? null }))
    .slice(-(props.max ?? 50))
    .reverse();
  const columns = gpu ? 5 : 3;
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
        {rows.map(({ row, epochs }) => (
          <React.Fragment key={`${row.executionCount}-${row.end}`}>
            <tr data-execution-count={row.executionCount}>
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
                <td className="jp-GpuHygiene-nowrap">
                  {formatBytes(row.peak)}
                </td>
              )}
              <td
                title={row.created?.map(m => m.label).join('\n') ?? undefined}
              >
                {row.created === null
                  ? '?'
                  : row.created.length
                    ? row.created.map(m => m.label).join(', ')
                    : '—'}
              </td>
            </tr>
            {epochs && (
              <EpochsLine
                epochs={epochs}
                executionCount={row.executionCount}
                columns={columns}
                gpu={gpu}
                trans={trans}
              />
            )}
          </React.Fragment>
        ))}
      </tbody>
    </table>
  );
}
