/**
 * Pieces the panel's tables share: the message shown in place of missing
 * content ({@link EmptyState}, also used by the panel itself) and the
 * sortable column header of the holders table ({@link SortHeader}). Both
 * render their props only.
 */
import React from 'react';
import type { HolderSortKey, IHolderSort } from '../../analysis/holders';

/**
 * A message in place of content: what is missing and what to do.
 *
 * Renders `div.jp-GpuHygiene-empty` with `data-kind` set to `kind` (e.g.
 * `"no-models"`, `"waiting"`, an agent status), so tests and styles can tell
 * the empty states apart.
 */
export function EmptyState(props: {
  /** The message, already translated. */
  children: React.ReactNode;
  /** What is missing, for `data-kind`. */
  kind?: string;
}): JSX.Element {
  return (
    <div className="jp-GpuHygiene-empty" data-kind={props.kind}>
      {props.children}
    </div>
  );
}

/**
 * A column header that sorts the holders table by `column`.
 *
 * A click on the active column flips its direction; a click on another
 * column sorts it descending for sizes and ascending for text. The header
 * carries `aria-sort`, and its button `data-column` and a ▲/▼ mark.
 */
export function SortHeader(props: {
  /** The column this header sorts by. */
  column: HolderSortKey;
  /** The table's current sort. */
  sort: IHolderSort;
  /** Called with the sort a click asks for. */
  onSort: (sort: IHolderSort) => void;
  /** The column's label, already translated. */
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
