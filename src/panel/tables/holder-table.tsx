/**
 * The "who holds VRAM" table: one row per live model (the holder paths that
 * keep it alive, its size, named or stale, and the Free / Delete… actions),
 * each followed by the rows of its parts (model copies, optimizer state,
 * tensors), from the rows `holderRows` (src/analysis/memory/holders.ts)
 * computes. Pure: renders its props and reports clicks through callbacks.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';
import { formatBytes, formatPlacement } from '../../analysis/format';
import type {
  IHolderRow,
  IHolderSort,
  IPartRow
} from '../../analysis/memory/holders';
import { EmptyState, Identifier, IdentifierList, SortHeader } from './common';

/** Holder paths shown in a row's first cell before `+n`. */
const MAX_PATHS = 4;

/** Props of {@link HoldersTable}. */
export interface IHoldersTableProps {
  /** The rows, already sorted, as `holderRows` returns them. */
  rows: ReadonlyArray<IHolderRow>;
  /** The current sort, for the headers. */
  sort: IHolderSort;
  /** Called with the sort a header click asks for. */
  onSort: (sort: IHolderSort) => void;
  /** "Free" on a stale model (its id). */
  onFree: (modelId: string) => void;
  /** "Delete…" on a named model (its id). */
  onDelete: (modelId: string) => void;
  /** Whether the agent's walk stopped early (adds a note). */
  truncated: boolean;
  /** Translations. */
  trans: TranslationBundle;
}

/**
 * Who holds VRAM: one `tr[data-model-id][data-state]` per live model, in the
 * order of `rows`, with a Free action on a stale model and Delete… on a named
 * one whose names can be deleted, each followed by its parts'
 * `tr.jp-GpuHygiene-partRow`; an {@link EmptyState} of kind `"no-models"`
 * when there is none. A model's size is its bytes on all devices
 * (parameters, buffers and gradients, shared storages once); a part's, what
 * it adds to the model and the parts before it.
 */
export function HoldersTable(props: IHoldersTableProps): JSX.Element {
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
              <ModelRow
                row={row}
                onFree={props.onFree}
                onDelete={props.onDelete}
                trans={trans}
              />
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

/** A model's row: its holders, kind and label, size, and the State cell. */
function ModelRow(
  props: { row: IHolderRow } & Pick<
    IHoldersTableProps,
    'onFree' | 'onDelete' | 'trans'
  >
): JSX.Element {
  const { row, trans } = props;
  return (
    <tr data-model-id={row.model.id} data-state={row.state}>
      <td className="jp-GpuHygiene-path" title={row.paths.join('\n')}>
        {row.paths.length ? (
          <IdentifierList names={row.paths} max={MAX_PATHS} trans={trans} />
        ) : (
          trans.__('nothing named')
        )}
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
                formatPlacement(row.model.bytes, trans),
                formatBytes(row.partBytes)
              )
            : formatPlacement(row.model.bytes, trans)
        }
      >
        {formatBytes(row.bytes)}
      </td>
      <td>
        <StateCell {...props} />
      </td>
    </tr>
  );
}

/** A model's state badge (stale or named) and its action: Free on a stale model, Delete… where names can be deleted. */
function StateCell(
  props: { row: IHolderRow } & Pick<
    IHoldersTableProps,
    'onFree' | 'onDelete' | 'trans'
  >
): JSX.Element {
  const { row, trans } = props;
  return (
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
        {row.state === 'stale' ? trans.__('stale') : trans.__('named')}
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
        <Identifier name={part.path} />
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
          formatPlacement(part.perDevice, trans)
        )}
      >
        {formatBytes(part.bytes)}
      </td>
      <td />
    </tr>
  );
}
