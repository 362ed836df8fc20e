/**
 * Pure views of the VRAM panel: the per-cell table, the "who holds VRAM"
 * tables (bytes per root, models with their paths and parts, loose tensors,
 * autograd graph holders), the leak trend line and the empty states. They
 * render their props only; the container (view.tsx) reads the model. Names
 * and paths from the kernel are rendered as text, never as HTML.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';
import type { ICellRow } from '../analysis/cells';
import {
  formatBytes,
  formatDelta,
  formatDuration,
  formatPlacement,
  listNames
} from '../analysis/format';
import type { IGraphRow } from '../analysis/graphs';
import {
  formatShape,
  HolderSortKey,
  IHolderRow,
  IHolderSort,
  IPartRow,
  IRootsSummary
} from '../analysis/holders';
import type { ILeakTrend } from '../analysis/trend';
import type { ITensorInfo, RootKind } from '../protocol';

/** A message in place of content: what is missing and what to do. */
export function EmptyState(props: {
  children: React.ReactNode;
  kind?: string;
}): JSX.Element {
  return (
    <div className="jp-GpuHygiene-empty" data-kind={props.kind}>
      {props.children}
    </div>
  );
}

/** The leak trend, one sentence. */
export function TrendSummary(props: {
  trend: ILeakTrend;
  gpu: boolean;
  cells: number;
  minPoints: number;
  trans: TranslationBundle;
}): JSX.Element {
  const { trend, gpu, cells, minPoints, trans } = props;
  let text: string;
  let level = 'info';
  if (!gpu) {
    text = trans.__(
      'Leak trend: needs a GPU (it follows PyTorch’s allocated memory on a CUDA device).'
    );
  } else if (trend.verdict === 'rising') {
    level = 'warn';
    text =
      trend.basis === 'cells'
        ? trans.__(
            'Leak trend: allocated climbs ~%1 per cell over %2 cells (R² %3). Something keeps tensors alive across cells, e.g. losses.append(loss) instead of loss.item().',
            formatBytes(trend.rate),
            trend.points,
            trend.r2.toFixed(2)
          )
        : trans.__(
            'Leak trend: allocated climbs ~%1 per minute inside cell %2 (%3 samples, R² %4). Something keeps tensors alive from step to step, e.g. losses.append(loss) instead of loss.item().',
            formatBytes(trend.rate),
            trend.executionCount === null ? '[*]' : `[${trend.executionCount}]`,
            trend.points,
            trend.r2.toFixed(2)
          );
  } else if (trend.verdict === 'no-data') {
    text = trans.__(
      'Leak trend: waiting for PyTorch to use CUDA in this kernel (allocated memory is not measurable before).'
    );
  } else if (trend.verdict === 'too-few') {
    text = trans.__(
      'Leak trend: %1 of %2 cells measured; run more cells for a verdict.',
      Math.min(cells, trend.points),
      minPoints
    );
  } else {
    level = 'ok';
    text = trans.__(
      'Leak trend: no steady rise of allocated memory over the last %1 cells.',
      trend.points
    );
  }
  return (
    <div
      className={`jp-GpuHygiene-trend jp-GpuHygiene-trend-${level}`}
      data-verdict={gpu ? trend.verdict : 'no-gpu'}
      role="status"
    >
      {text}
    </div>
  );
}

/** Per-cell table: newest first, at most `max` rows. */
export function CellTable(props: {
  cells: ReadonlyArray<ICellRow>;
  gpu: boolean;
  trans: TranslationBundle;
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

function SortHeader(props: {
  column: HolderSortKey;
  sort: IHolderSort;
  onSort: (sort: IHolderSort) => void;
  children: React.ReactNode;
}): JSX.Element {
  const { column, sort, onSort } = props;
  const active = sort.key === column;
  const next: IHolderSort = {
    key: column,
    direction:
      active && sort.direction === 'desc'
        ? 'asc'
        : active
          ? 'desc'
          : column === 'bytes'
            ? 'desc'
            : 'asc'
  };
  return (
    <th
      scope="col"
      aria-sort={
        active
          ? sort.direction === 'asc'
            ? 'ascending'
            : 'descending'
          : 'none'
      }
    >
      <button
        className="jp-GpuHygiene-sort"
        data-column={column}
        onClick={() => onSort(next)}
      >
        {props.children}
        {active ? (sort.direction === 'asc' ? ' ▲' : ' ▼') : ''}
      </button>
    </th>
  );
}

/** Holder paths shown in a row's first cell before `+n`. */
const MAX_PATHS = 4;

/** Who holds VRAM: one row per live model, with free / delete… actions. */
export function HoldersTable(props: {
  rows: ReadonlyArray<IHolderRow>;
  sort: IHolderSort;
  onSort: (sort: IHolderSort) => void;
  onFree: (modelId: string) => void;
  onDelete: (modelId: string) => void;
  truncated: boolean;
  trans: TranslationBundle;
}): JSX.Element {
  const { rows, sort, onSort, trans } = props;
  if (!rows.length) {
    return (
      <EmptyState kind="no-models">
        {trans.__(
          'No live PyTorch model in this kernel. Models appear here after the cell that creates them, with what keeps each one alive.'
        )}
      </EmptyState>
    );
  }
  return (
    <>
      <table className="jp-GpuHygiene-table jp-GpuHygiene-holders">
        <thead>
          <tr>
            <SortHeader column="holder" sort={sort} onSort={onSort}>
              {trans.__('Holder')}
            </SortHeader>
            <SortHeader column="kind" sort={sort} onSort={onSort}>
              {trans.__('Model')}
            </SortHeader>
            <SortHeader column="bytes" sort={sort} onSort={onSort}>
              {trans.__('Size')}
            </SortHeader>
            <SortHeader column="state" sort={sort} onSort={onSort}>
              {trans.__('State')}
            </SortHeader>
          </tr>
        </thead>
        <tbody>
          {rows.map(row => (
            <React.Fragment key={`${row.model.id}:${row.model.order}`}>
              <tr data-model-id={row.model.id} data-state={row.state}>
                <td className="jp-GpuHygiene-path" title={row.paths.join('\n')}>
                  {row.paths.length
                    ? listNames(row.paths, MAX_PATHS)
                    : trans.__('nothing named')}
                </td>
                <td title={`${row.model.module}.${row.model.className}`}>
                  {row.model.label.startsWith(row.kind) ? null : (
                    <span className="jp-GpuHygiene-kind">{row.kind} </span>
                  )}
                  {row.model.label}
                </td>
                <td
                  className="jp-GpuHygiene-nowrap"
                  title={
                    row.parts.length
                      ? trans.__(
                          '%1; its parts below add %2',
                          formatPlacement(row.model.bytes),
                          formatBytes(row.partBytes)
                        )
                      : formatPlacement(row.model.bytes)
                  }
                >
                  {formatBytes(row.bytes)}
                </td>
                <td>
                  <div className="jp-GpuHygiene-state">
                    <span
                      className={`jp-GpuHygiene-badge jp-GpuHygiene-badge-${row.state}`}
                      title={
                        row.state === 'stale'
                          ? trans.__(
                              'No variable of yours reaches it: only the output cache, the last traceback or a reference cycle keeps it alive.'
                            )
                          : trans.__('A variable of yours still names it.')
                      }
                    >
                      {row.state === 'stale'
                        ? trans.__('stale')
                        : trans.__('named')}
                    </span>
                    {row.state === 'stale' ? (
                      <button
                        className="jp-GpuHygiene-action jp-GpuHygiene-action-free"
                        data-action="free"
                        title={trans.__(
                          'Insert a cell below the active cell that drops only what keeps this model alive'
                        )}
                        onClick={() => props.onFree(row.model.id)}
                      >
                        {trans.__('Free')}
                      </button>
                    ) : row.deletable.length ? (
                      <button
                        className="jp-GpuHygiene-action jp-GpuHygiene-action-delete"
                        data-action="delete"
                        title={trans.__(
                          'Ask, then insert a cell that runs del %1 and frees the model',
                          row.deletable.join(', ')
                        )}
                        onClick={() => props.onDelete(row.model.id)}
                      >
                        {trans.__('Delete…')}
                      </button>
                    ) : null}
                  </div>
                </td>
              </tr>
              {row.parts.map((part, i) => (
                <PartRow
                  key={`${part.path}:${i}`}
                  part={part}
                  modelId={row.model.id}
                  trans={trans}
                />
              ))}
            </React.Fragment>
          ))}
        </tbody>
      </table>
      {props.truncated && (
        <div className="jp-GpuHygiene-note">
          {trans.__(
            'The kernel has many objects: the walk stopped early, so some holders may be missing.'
          )}
        </div>
      )}
    </>
  );
}

/** Label of a part's kind. */
function partKind(kind: IPartRow['kind'], trans: TranslationBundle): string {
  switch (kind) {
    case 'model':
      return trans.__('model copy');
    case 'optimizer':
      return trans.__('optimizer state');
    case 'tensor':
      return trans.__('tensor');
  }
}

/** A part of a model (trainer, EMA, optimizer state), nested under its model's row. */
function PartRow(props: {
  part: IPartRow;
  modelId: string;
  trans: TranslationBundle;
}): JSX.Element {
  const { part, trans } = props;
  return (
    <tr
      className="jp-GpuHygiene-partRow"
      data-part-of={props.modelId}
      data-part-kind={part.kind}
    >
      <td className="jp-GpuHygiene-path" title={part.path}>
        <span className="jp-GpuHygiene-partMark" aria-hidden="true">
          ↳{' '}
        </span>
        {part.path}
      </td>
      <td>
        <span className="jp-GpuHygiene-kind">
          {partKind(part.kind, trans)}{' '}
        </span>
        {part.className}
      </td>
      <td
        className="jp-GpuHygiene-nowrap"
        title={trans.__(
          '%1, not counted in the model or an earlier part',
          formatPlacement(part.perDevice)
        )}
      >
        {formatBytes(part.bytes)}
      </td>
      <td />
    </tr>
  );
}

/** Label of a root's kind. */
export function rootKindLabel(
  kind: RootKind,
  trans: TranslationBundle
): string {
  switch (kind) {
    case 'variable':
      return trans.__('variable');
    case 'output':
      return trans.__('output cache');
    case 'traceback':
      return trans.__('last traceback');
    case 'hidden':
      return trans.__('nothing named');
  }
}

/**
 * Who holds the bytes: one row per root (every storage counted once), an
 * "unattributed" row for what PyTorch allocated that no root reaches, and
 * the total, which is PyTorch allocated when the inventory was taken.
 */
export function RootsTable(props: {
  summary: IRootsSummary;
  trans: TranslationBundle;
}): JSX.Element | null {
  const { summary, trans } = props;
  if (!summary.rows.length && summary.unattributed === null) {
    return null;
  }
  const where = summary.device ?? trans.__('all devices');
  return (
    <table className="jp-GpuHygiene-table jp-GpuHygiene-roots">
      <thead>
        <tr>
          <th scope="col">{trans.__('Root')}</th>
          <th scope="col">{trans.__('Kind')}</th>
          <th scope="col" title={trans.__('Bytes on %1', where)}>
            {summary.device
              ? trans.__('On %1', summary.device)
              : trans.__('Size')}
          </th>
          <th
            scope="col"
            title={trans.__('Models and loose tensors counted under the root')}
          >
            {trans.__('Models / tensors')}
          </th>
        </tr>
      </thead>
      <tbody>
        {summary.rows.map(row => (
          <tr
            key={`${row.kind}:${row.name}`}
            data-root-kind={row.kind}
            data-root={row.name}
          >
            <td className="jp-GpuHygiene-path" title={row.name}>
              {row.name}
            </td>
            <td>{rootKindLabel(row.kind, trans)}</td>
            <td
              className="jp-GpuHygiene-nowrap"
              title={formatPlacement(row.perDevice)}
            >
              {formatBytes(row.bytes)}
            </td>
            <td className="jp-GpuHygiene-nowrap">
              {row.models} / {row.tensors}
            </td>
          </tr>
        ))}
        {summary.unattributed !== null && (
          <tr data-root-kind="unattributed" className="jp-GpuHygiene-muted">
            <td
              title={trans.__(
                'PyTorch allocated that no root reaches: cuBLAS workspaces, tensors only C++ code or a closed-over frame holds, memory behind a cut walk'
              )}
            >
              {trans.__('unattributed')}
            </td>
            <td>{trans.__('not reachable from a name')}</td>
            <td className="jp-GpuHygiene-nowrap">
              {formatBytes(summary.unattributed)}
            </td>
            <td />
          </tr>
        )}
      </tbody>
      {summary.device !== null && summary.unattributed !== null && (
        <tfoot>
          <tr data-root-kind="total">
            <th
              scope="row"
              colSpan={2}
              title={trans.__(
                'The roots and the unattributed row add up to PyTorch allocated on %1 when the inventory was taken',
                summary.device
              )}
            >
              {trans.__('PyTorch allocated')}
            </th>
            <td className="jp-GpuHygiene-nowrap">
              {formatBytes(summary.total)}
            </td>
            <td />
          </tr>
        </tfoot>
      )}
    </table>
  );
}

/** The largest tensors outside any model (≥ 1 MiB, at most 20), largest first. */
export function TensorsTable(props: {
  tensors: ReadonlyArray<ITensorInfo>;
  trans: TranslationBundle;
}): JSX.Element | null {
  const { tensors, trans } = props;
  if (!tensors.length) {
    return null;
  }
  return (
    <table className="jp-GpuHygiene-table jp-GpuHygiene-tensors">
      <thead>
        <tr>
          <th scope="col">{trans.__('Path')}</th>
          <th scope="col">{trans.__('Tensor')}</th>
          <th scope="col">{trans.__('Size')}</th>
          <th
            scope="col"
            title={trans.__(
              'The autograd function that made it: a tensor with a grad_fn keeps its graph alive'
            )}
          >
            {trans.__('grad_fn')}
          </th>
        </tr>
      </thead>
      <tbody>
        {tensors.map((tensor, i) => (
          <tr key={`${tensor.path}:${i}`} data-tensor-kind={tensor.kind}>
            <td className="jp-GpuHygiene-path" title={tensor.path}>
              {tensor.path}
            </td>
            <td className="jp-GpuHygiene-nowrap">
              {formatShape(tensor.shape)} {tensor.dtype} {tensor.device}
            </td>
            <td className="jp-GpuHygiene-nowrap">
              {formatBytes(tensor.bytes)}
            </td>
            <td>{tensor.gradFn ?? '—'}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/**
 * Variables that keep autograd graphs alive (`losses.append(loss)`), with
 * the fix and, where the variable is a plain name holding the tensors itself,
 * a "Fix…" action (it asks before inserting code).
 */
export function GraphsTable(props: {
  graphs: ReadonlyArray<IGraphRow>;
  onFix: (name: string) => void;
  trans: TranslationBundle;
}): JSX.Element | null {
  const { graphs, trans } = props;
  if (!graphs.length) {
    return null;
  }
  return (
    <>
      <table className="jp-GpuHygiene-table jp-GpuHygiene-graphs">
        <thead>
          <tr>
            <th scope="col">{trans.__('Variable')}</th>
            <th
              scope="col"
              title={trans.__('Tensors with a grad_fn in the variable')}
            >
              {trans.__('Graphs')}
            </th>
            <th
              scope="col"
              title={trans.__(
                'Estimated bytes the graphs keep alive (the tensors and what they saved for backward)'
              )}
            >
              {trans.__('Kept')}
            </th>
            <th scope="col">{trans.__('grad_fn')}</th>
          </tr>
        </thead>
        <tbody>
          {graphs.map(row => (
            <tr
              key={`${row.graph.name}:${row.graph.path}`}
              data-graph={row.graph.name}
            >
              <td className="jp-GpuHygiene-path" title={row.graph.path}>
                {row.graph.path}
              </td>
              <td className="jp-GpuHygiene-nowrap">
                {trans.__('%1 in a %2', row.graph.count, row.graph.container)}
              </td>
              <td
                className="jp-GpuHygiene-nowrap"
                title={
                  row.graph.truncated
                    ? trans.__(
                        '%1; the walk stopped after %2 nodes, so this is a lower bound',
                        formatPlacement(row.graph.bytes),
                        row.graph.nodes
                      )
                    : formatPlacement(row.graph.bytes)
                }
              >
                {row.graph.truncated ? '≥ ' : '~'}
                {formatBytes(row.bytes)}
              </td>
              <td>
                <div className="jp-GpuHygiene-state">
                  <span>{row.graph.gradFn}</span>
                  {row.fixable && (
                    <button
                      className="jp-GpuHygiene-action jp-GpuHygiene-action-fix"
                      data-action="fix"
                      title={trans.__(
                        'Ask, then insert a cell that replaces the tensors in %1 by tensor.detach() (same values, no graph)',
                        row.graph.name
                      )}
                      onClick={() => props.onFix(row.graph.name)}
                    >
                      {trans.__('Fix…')}
                    </button>
                  )}
                </div>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <div className="jp-GpuHygiene-note jp-GpuHygiene-graphFix">
        {trans.__(
          'Fix: store loss.item() or loss.detach(), or run evaluation under torch.no_grad().'
        )}
      </div>
    </>
  );
}
